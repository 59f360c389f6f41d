/** The external interface, as the agent found it: what family planes and backends are built from. */
import type { IpAddr } from '../ip/ip.js';

/** The interface peers reach this node through (flanneld's "external interface"). */
export interface ExternalInterface {
  readonly index: number;
  readonly name: string;
  readonly mtu: number;
  /** The interface's own IPv4 address, if it has one. */
  readonly ifaceAddr?: IpAddr;
  readonly ifaceAddr6?: IpAddr;
  /** What peers send to: `--public-ip`, else the interface address. */
  readonly publicIp?: IpAddr;
  readonly publicIpv6?: IpAddr;
}
