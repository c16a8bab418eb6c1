package hooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// ErrRefusedAddress is returned (wrapped) when a hook URL's host is, or
// resolves to, an address hooks may not reach.
var ErrRefusedAddress = errors.New("hooks: address refused")

// blockedPrefixes are the ranges a hook may not reach unless private
// addresses are allowed, beyond what netip.Addr's predicates name
// (loopback, private, link-local, multicast, unspecified).
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // CGNAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may embed any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
}

// Blocked reports whether a hook may not reach ip when private addresses
// are not allowed: loopback, private (RFC 1918, fc00::/7, which holds the
// metadata address fd00:ec2::254), link-local (169.254.0.0/16, which holds
// 169.254.169.254, and fe80::/10), multicast, unspecified, CGNAT, reserved
// and documentation ranges, and IPv6 forms embedding IPv4 addresses.
func Blocked(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Resolver looks host names up; net.DefaultResolver has it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard checks hook URLs and the addresses connections reach.
type Guard struct {
	// AllowPrivate lets hooks reach every address (development, tests).
	AllowPrivate bool
	// Resolver resolves host names (default net.DefaultResolver).
	Resolver Resolver
}

// MaxURLLength bounds a hook URL.
const MaxURLLength = 2048

// CheckURL returns nil if raw is an http or https URL without user
// information whose host, and every address it resolves to, a hook may
// reach. Otherwise it returns an error that says why and wraps
// ErrRefusedAddress for a refused address.
func (g Guard) CheckURL(ctx context.Context, raw string) error {
	if len(raw) > MaxURLLength {
		return fmt.Errorf("longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return errors.New("must be an absolute http or https URL")
	}
	if u.User != nil {
		return errors.New("must not hold user information")
	}
	if u.Fragment != "" {
		return errors.New("must not hold a fragment")
	}
	if g.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if Blocked(ip) {
			return fmt.Errorf("%w: a loopback, private, link-local, metadata or reserved address", ErrRefusedAddress)
		}
		return nil
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost") {
		return fmt.Errorf("%w: localhost", ErrRefusedAddress)
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return errors.New("its host does not resolve")
	}
	for _, ip := range ips {
		if Blocked(ip) {
			return fmt.Errorf("%w: its host resolves to a loopback, private, link-local, metadata or reserved address", ErrRefusedAddress)
		}
	}
	return nil
}

// Control is a net.Dialer control function that refuses connections to
// blocked addresses (unless private ones are allowed). It sees the address
// actually dialled, after resolution, so a name that resolves differently
// at delivery than at creation (DNS rebinding) is refused too.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address", ErrRefusedAddress)
	}
	if Blocked(ap.Addr()) {
		return fmt.Errorf("%w: a loopback, private, link-local, metadata or reserved address", ErrRefusedAddress)
	}
	return nil
}
