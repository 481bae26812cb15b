// Which addresses a webhook may target: not private, loopback, link-local (cloud metadata among
// them) or reserved ones, unless the group sets WEBHOOK_ALLOW_PRIVATE=true.
import net from 'node:net';

const blocked = new net.BlockList();
// Private, loopback, link-local (cloud metadata 169.254.169.254 among them), shared, reserved, multicast.
for (const [a, p] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(a, p, 'ipv4');
// Unspecified, loopback, unique local (fd00:ec2::254, a metadata address, among them), link-local,
// site-local, multicast, NAT64. (BlockList matches an IPv4-mapped address by its IPv4 rules.)
for (const [a, p] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
] as const)
  blocked.addSubnet(a, p, 'ipv6');

/** Why an address may not be a webhook target (undefined: it may). */
export function privateAddressProblem(address: string): string | undefined {
  // IPv4-mapped, dotted (::ffff:127.0.0.1) or hex (::ffff:7f00:1): judged as the IPv4 address.
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  const a = dotted
    ? dotted[1]
    : hex
      ? [parseInt(hex[1], 16) >> 8, parseInt(hex[1], 16) & 255, parseInt(hex[2], 16) >> 8, parseInt(hex[2], 16) & 255].join('.')
      : address;
  const family = net.isIP(a);
  if (family === 0) return `${address} is not an IP address`;
  return blocked.check(a, family === 4 ? 'ipv4' : 'ipv6')
    ? `${address} is a private, loopback, link-local or reserved address (set WEBHOOK_ALLOW_PRIVATE=true to allow it)`
    : undefined;
}

/** The host of a URL as an IP literal, when it is one. */
export function literalHost(url: URL): string | undefined {
  const h = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return net.isIP(h) ? h : undefined;
}
