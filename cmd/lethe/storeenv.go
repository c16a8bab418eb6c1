package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lethe-io/lethe"
)

// storeEnv completes a store configuration from the environment: the Vault
// transit KEK and the Trillian audit log. Secrets come from files named by
// the environment, never from flags.
//
//	LETHE_VAULT_ADDR         Vault address; unset means the local age KEK
//	LETHE_VAULT_TOKEN_FILE   file holding the Vault token (or VAULT_TOKEN)
//	LETHE_VAULT_MOUNT        transit mount (default transit)
//	LETHE_VAULT_KEY          transit key name (default lethe-kek)
//	LETHE_VAULT_DEDICATED    true: one transit key per data key, deleted on erase
//	LETHE_TRILLIAN_ADDR      Trillian log server host:port; unset means the embedded log
//	LETHE_TRILLIAN_TREE_ID   its PREORDERED_LOG tree id
//	LETHE_AUDIT_ORIGIN       checkpoint origin (names a new signing key)
//	LETHE_AUDIT_KEY_FILE     the audit signing key (default DATA/audit.key)
//	LETHE_HOOKS_ALLOW_PRIVATE  1: hook URLs may reach loopback, private and
//	                         other internal addresses (development only)
func storeEnv(cfg *lethe.Config) error {
	if v, _ := strconv.ParseBool(os.Getenv("LETHE_HOOKS_ALLOW_PRIVATE")); v {
		cfg.Hooks.AllowPrivate = true
	}
	if addr := os.Getenv("LETHE_VAULT_ADDR"); addr != "" {
		token := os.Getenv("VAULT_TOKEN")
		if f := os.Getenv("LETHE_VAULT_TOKEN_FILE"); f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("read Vault token file: %w", err)
			}
			token = strings.TrimSpace(string(b))
		}
		if token == "" {
			return usagef("LETHE_VAULT_ADDR is set but no token: set LETHE_VAULT_TOKEN_FILE")
		}
		dedicated, _ := strconv.ParseBool(os.Getenv("LETHE_VAULT_DEDICATED"))
		kek, err := lethe.NewVaultKEK(lethe.VaultConfig{Address: addr, Token: token, Mount: os.Getenv("LETHE_VAULT_MOUNT"),
			KeyName: os.Getenv("LETHE_VAULT_KEY"), Dedicated: dedicated})
		if err != nil {
			return err
		}
		cfg.KEK = kek
	}
	if addr := os.Getenv("LETHE_TRILLIAN_ADDR"); addr != "" {
		id, err := strconv.ParseInt(os.Getenv("LETHE_TRILLIAN_TREE_ID"), 10, 64)
		if err != nil || id <= 0 {
			return usagef("LETHE_TRILLIAN_ADDR is set but LETHE_TRILLIAN_TREE_ID is not a tree id")
		}
		cfg.TrillianAddr, cfg.TrillianTreeID = addr, id
	}
	if o := os.Getenv("LETHE_AUDIT_ORIGIN"); o != "" && cfg.AuditOrigin == "" {
		cfg.AuditOrigin = o
	}
	if f := os.Getenv("LETHE_AUDIT_KEY_FILE"); f != "" && cfg.AuditKeyFile == "" {
		cfg.AuditKeyFile = f
	}
	return nil
}
