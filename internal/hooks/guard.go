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

// reserved lists the address ranges a hook may not reach unless private
// addresses are allowed: the IANA special-purpose ranges that are not
// globally reachable (RFC 6890 and its updates), and every IPv6 range that
// embeds an IPv4 address, which could name an internal one (IPv4-compatible,
// NAT64, 6to4, Teredo, IPv4-translated). One exception is mapped rather
// than refused: an IPv4-mapped address (::ffff:a.b.c.d) is checked as the
// IPv4 address it maps, as Go itself treats it. Blocked checks an address,
// when a hook is created and on every connection, against this table only.
var reserved = []struct {
	Prefix netip.Prefix
	Name   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network, the unspecified address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "CGNAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, cloud metadata (169.254.169.254)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, the broadcast address"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (embeds an IPv4 address), the unspecified and loopback addresses"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated (embeds an IPv4 address)"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64 (embeds an IPv4 address)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (embeds an IPv4 address)"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo (embeds an IPv4 address)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4 (embeds an IPv4 address)"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private), cloud metadata (fd00:ec2::254)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "deprecated site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Blocked reports whether a hook may not reach ip when private addresses
// are not allowed: ip (with no zone, and an IPv4-mapped address as the
// IPv4 address it maps) is in a range of reserved, or is not an address.
func Blocked(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	// A prefix never contains an address with a zone (fe80::1%eth0): drop
	// it, so that the table decides.
	ip = ip.WithZone("").Unmap()
	for _, r := range reserved {
		if r.Prefix.Contains(ip) {
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
