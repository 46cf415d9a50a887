//! Who is at the other end of a loopback TCP connection: the uid that owns
//! the peer's socket.
//!
//! TCP carries no credentials, but on loopback both ends are sockets of
//! this kernel, and the kernel knows who created each. The peer's socket is
//! the one whose *local* side is the address we see as the peer and whose
//! remote side is our end. The netlink `sock_diag` interface (`inet_diag`,
//! what `ss -e` uses) looks that one socket up exactly; where netlink is
//! not allowed (a seccomp filter, `RestrictAddressFamilies=`), the same
//! line is found in `/proc/net/tcp` or `/proc/net/tcp6`. Both are readable
//! without privileges.

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The uid that owns the socket at `peer` connected to our `local` end.
/// An error when the kernel knows no such socket (the peer is gone) or
/// neither interface can be read.
pub(crate) fn uid_of(local: SocketAddr, peer: SocketAddr) -> io::Result<u32> {
    let (local, peer) = (canonical(local), canonical(peer));
    match sock_diag(local, peer) {
        Ok(uid) => Ok(uid),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(e),
        Err(e) => {
            tracing::debug!(error = %e, "sock_diag failed; looking in /proc/net/tcp");
            proc_net_tcp(local, peer)
        }
    }
}

/// IPv4-mapped IPv6 addresses (a dual-stack listener's view of an IPv4
/// peer) as the IPv4 addresses they are.
fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// The 16 address bytes `inet_diag` and `/proc/net/tcp6` use (IPv4 in the
/// first four).
fn bytes16(ip: IpAddr) -> [u8; 16] {
    let mut b = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => b = v6.octets(),
    }
    b
}

// linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h.
const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const INET_DIAG_NOCOOKIE: u32 = !0;

/// `struct inet_diag_sockid`: ports and addresses in network order.
#[repr(C)]
#[derive(Clone, Copy)]
struct SockId {
    sport: [u8; 2],
    dport: [u8; 2],
    src: [u8; 16],
    dst: [u8; 16],
    ifindex: u32,
    cookie: [u32; 2],
}

/// `struct nlmsghdr` followed by `struct inet_diag_req_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Request {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: SockId,
}

/// Where `idiag_uid` sits in an answer: after the 16-byte `nlmsghdr`, in
/// `struct inet_diag_msg` after family, state, timer, retrans (4 bytes),
/// the 48-byte id and expires, rqueue, wqueue (12 bytes).
const UID_OFFSET: usize = 16 + 4 + size_of::<SockId>() + 12;

/// One exact `SOCK_DIAG_BY_FAMILY` lookup (no dump: the kernel finds the
/// socket by its four-tuple, as for an incoming packet).
fn sock_diag(local: SocketAddr, peer: SocketAddr) -> io::Result<u32> {
    // SAFETY: socket(2) with constant arguments; the result is checked
    // and owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval of the size passed.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    let family = if peer.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let req = Request {
        len: size_of::<Request>() as u32,
        kind: SOCK_DIAG_BY_FAMILY,
        flags: libc::NLM_F_REQUEST as u16,
        seq: 1,
        pid: 0,
        family: family as u8,
        protocol: libc::IPPROTO_TCP as u8,
        ext: 0,
        pad: 0,
        states: !0,
        // The peer's socket: its source is the peer, its destination us.
        id: SockId {
            sport: peer.port().to_be_bytes(),
            dport: local.port().to_be_bytes(),
            src: bytes16(peer.ip()),
            dst: bytes16(local.ip()),
            ifindex: 0,
            cookie: [INET_DIAG_NOCOOKIE; 2],
        },
    };
    // SAFETY: sockaddr_nl is plain data; zeroed is its "the kernel" value.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: req and kernel are valid for the lengths passed.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            (&req as *const Request).cast(),
            size_of::<Request>(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 8192];
    // SAFETY: buf is valid for its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    parse_answer(&buf[..n as usize])
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// The uid in the kernel's answer, or its error (`ENOENT`: no such socket).
fn parse_answer(b: &[u8]) -> io::Result<u32> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "short sock_diag answer");
    let kind = u16_at(b, 4).ok_or_else(bad)?;
    if kind == NLMSG_ERROR {
        let errno = u32_at(b, 16).ok_or_else(bad)? as i32;
        return Err(if errno == 0 {
            bad()
        } else {
            io::Error::from_raw_os_error(-errno)
        });
    }
    if kind != SOCK_DIAG_BY_FAMILY {
        return Err(bad());
    }
    u32_at(b, UID_OFFSET).ok_or_else(bad)
}

/// The same lookup in `/proc/net/tcp` (IPv4) or `/proc/net/tcp6`.
fn proc_net_tcp(local: SocketAddr, peer: SocketAddr) -> io::Result<u32> {
    if let (SocketAddr::V4(_), SocketAddr::V4(_)) = (local, peer) {
        if let Some(uid) = find_in(&std::fs::read_to_string("/proc/net/tcp")?, local, peer) {
            return Ok(uid);
        }
        // An AF_INET6 client socket talking IPv4 shows there, mapped.
        let mapped = |a: SocketAddr| match a.ip() {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
            IpAddr::V6(_) => a,
        };
        let tcp6 = std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
        return find_in(&tcp6, mapped(local), mapped(peer)).ok_or_else(not_found);
    }
    find_in(&std::fs::read_to_string("/proc/net/tcp6")?, local, peer).ok_or_else(not_found)
}

fn not_found() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "no such socket")
}

/// The uid of the line whose local address is `peer` and remote `local`.
fn find_in(table: &str, local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (parse_proc_addr(f.get(1)?)? == peer && parse_proc_addr(f.get(2)?)? == local)
            .then(|| f.get(7)?.parse().ok())
            .flatten()
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the
/// address as the kernel prints it, each 32-bit word in host order.
fn parse_proc_addr(s: &str) -> Option<SocketAddr> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip = match addr.len() {
        8 => IpAddr::from(word(0)?),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_owner_of_a_loopback_peer_is_found_both_ways() {
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = TcpListener::bind(bind) else {
                continue; // no IPv6 here
            };
            let client = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
            let (server, peer) = l.accept().expect("accept");
            let local = server.local_addr().expect("local");
            assert_eq!(peer, client.local_addr().expect("client addr"));
            assert_eq!(sock_diag(local, peer).expect("sock_diag"), me, "{bind}");
            assert_eq!(proc_net_tcp(local, peer).expect("/proc"), me, "{bind}");
            assert_eq!(uid_of(local, peer).expect("uid_of"), me, "{bind}");
            drop(client);
            drop(server);
        }
    }

    #[test]
    fn an_unknown_peer_is_not_found() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let local = l.local_addr().expect("addr");
        let nobody: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let e = sock_diag(local, nobody).expect_err("no such socket");
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let e = proc_net_tcp(local, nobody).expect_err("no such line");
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn proc_addresses_parse() {
        assert_eq!(
            parse_proc_addr("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().expect("addr"))
        );
        assert_eq!(
            parse_proc_addr("00000000000000000000000001000000:0050"),
            Some("[::1]:80".parse().expect("addr"))
        );
        assert_eq!(parse_proc_addr("zz:1"), None);
    }
}
