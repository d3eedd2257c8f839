// The address policy: which addresses may be dialled.

package webfetch

import (
	"fmt"
	"net/netip"
)

// Address ranges that are not the public internet, beyond what
// netip.Addr's predicates cover.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (and Alibaba's metadata service)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (and Oracle's metadata service)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/32"),       // Teredo: the tunnelled address is hidden
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local, deprecated
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixToF4 = netip.MustParsePrefix("2002::/16")
)

// checkAddr is the web fetch's address policy: it refuses loopback,
// private, link-local (cloud metadata services included), unspecified,
// multicast, broadcast and reserved addresses, in IPv4 and in every IPv6
// form that carries an IPv4 address (mapped, compatible, NAT64, 6to4).
func checkAddr(ap netip.AddrPort) error {
	a := ap.Addr().WithZone("")
	if !a.IsValid() {
		return fmt.Errorf("invalid address")
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case a.Is4In6():
			a = a.Unmap()
		case [12]byte(b[:12]) == [12]byte{}: // IPv4-compatible, :: and ::1 included
			a = netip.AddrFrom4([4]byte(b[12:]))
		case nat64.Contains(a):
			a = netip.AddrFrom4([4]byte(b[12:]))
		case sixToF4.Contains(a):
			a = netip.AddrFrom4([4]byte(b[2:6]))
		}
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return fmt.Errorf("%s is a private or local address", ap.Addr())
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return fmt.Errorf("%s is a reserved address", ap.Addr())
		}
	}
	return nil
}
