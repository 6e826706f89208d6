//! Both endpoints of a connection in one process, over real loopback sockets.

use super::*;
use crate::transport::{
    Completion, CompletionOp, Endpoint, RecvRequest, RemoteAddr, SendOp, SendRequest,
};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Instant;

fn cfg(role: Role, buf_len: usize) -> TcpConfig {
    TcpConfig {
        role,
        qps: 1,
        buf_len,
        sq_depth: 64,
        rq_depth: 64,
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        connect_timeout: Duration::from_secs(5),
        socket_buffer: None,
        tclass: None,
        priority: None,
        congestion: None,
        spin_polls: DEFAULT_SPIN_POLLS,
    }
}

/// A connected pair of endpoints in one process.
fn pair(buf_len: usize) -> (TcpEndpoint, TcpEndpoint) {
    let mut server = TcpEndpoint::new(cfg(Role::Server, buf_len)).unwrap();
    let mut client = TcpEndpoint::new(cfg(Role::Client, buf_len)).unwrap();
    let (si, ci) = (server.local_info(), client.local_info());
    client.connect(&si).unwrap();
    server.connect(&ci).unwrap();
    (server, client)
}

/// Polls both endpoints until `a` yields `want` completions; returns them.
fn drive(a: &mut TcpEndpoint, b: &mut TcpEndpoint, want: usize) -> Vec<Completion> {
    let mut got = Vec::new();
    let mut out = [Completion::EMPTY; 16];
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < want {
        let n = a.poll_cq(&mut out).unwrap();
        got.extend_from_slice(&out[..n]);
        let _ = b.poll_cq(&mut out).unwrap();
        assert!(
            Instant::now() < deadline,
            "timed out with {} of {want} completions",
            got.len()
        );
    }
    got
}

fn write_req(
    ep: &TcpEndpoint,
    peer: &TcpEndpoint,
    wr_id: u64,
    off: u64,
    len: u32,
    op: SendOp,
) -> SendRequest {
    let _ = ep;
    let p = &peer.local_info().qps[0];
    SendRequest {
        wr_id,
        op,
        offset: off,
        len,
        remote: Some(RemoteAddr {
            addr: p.vaddr + off,
            rkey: p.rkey,
        }),
        signaled: true,
        inline: false,
    }
}

#[test]
fn write_lands_at_the_offset_in_the_peer_buffer() {
    let (mut server, mut client) = pair(1 << 20);
    let len = 300_000usize;
    for (i, b) in client.buffer_mut(0)[..len].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    // Move the data from client offset 0 to server offset 1000 (the remote offset names the target).
    let mut wr = write_req(&client, &server, 7, 0, len as u32, SendOp::Write);
    wr.remote.as_mut().unwrap().addr += 1000;
    client.post_send(0, &wr).unwrap();
    let c = drive(&mut client, &mut server, 1);
    assert_eq!(
        (c[0].wr_id, c[0].op, c[0].byte_len),
        (7, CompletionOp::Write, len as u32)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.peek(0, 1000 + len - 1) != ((len - 1) % 251) as u8 {
        server.poll_cq(&mut [Completion::EMPTY; 4]).unwrap();
        assert!(Instant::now() < deadline);
    }
    let buf = server.buffer(0);
    assert!(buf[..1000].iter().all(|&b| b == 0));
    assert!((0..len).all(|i| buf[1000 + i] == (i % 251) as u8));
}

#[test]
fn send_consumes_posted_receives_in_order() {
    let (mut server, mut client) = pair(4096);
    server
        .post_recv(
            0,
            &RecvRequest {
                wr_id: 1,
                offset: 0,
                len: 100,
            },
        )
        .unwrap();
    server
        .post_recv(
            0,
            &RecvRequest {
                wr_id: 2,
                offset: 200,
                len: 100,
            },
        )
        .unwrap();
    client.buffer_mut(0)[..10].copy_from_slice(b"0123456789");
    for (id, op) in [(10, SendOp::Send), (11, SendOp::SendWithImm(42))] {
        let wr = SendRequest {
            wr_id: id,
            op,
            offset: 0,
            len: 10,
            remote: None,
            signaled: true,
            inline: false,
        };
        client.post_send(0, &wr).unwrap();
    }
    let rc = drive(&mut server, &mut client, 2);
    assert_eq!(
        (rc[0].wr_id, rc[0].op, rc[0].byte_len, rc[0].imm),
        (1, CompletionOp::Recv, 10, None)
    );
    assert_eq!((rc[1].wr_id, rc[1].imm), (2, Some(42)));
    assert_eq!(&server.buffer(0)[..10], b"0123456789");
    assert_eq!(&server.buffer(0)[200..210], b"0123456789");
}

#[test]
fn write_with_immediate_places_data_and_consumes_a_receive() {
    let (mut server, mut client) = pair(8192);
    server
        .post_recv(
            0,
            &RecvRequest {
                wr_id: 77,
                offset: 0,
                len: 0,
            },
        )
        .unwrap();
    client.buffer_mut(0)[..3].copy_from_slice(b"imm");
    let mut wr = write_req(&client, &server, 1, 0, 3, SendOp::WriteWithImm(0xabcd));
    wr.remote.as_mut().unwrap().addr += 4096;
    client.post_send(0, &wr).unwrap();
    let c = drive(&mut server, &mut client, 1);
    assert_eq!(
        (c[0].wr_id, c[0].op, c[0].byte_len, c[0].imm),
        (77, CompletionOp::RecvWithImm, 3, Some(0xabcd))
    );
    assert_eq!(&server.buffer(0)[4096..4099], b"imm");
}

#[test]
fn send_waits_for_a_receive_to_be_posted() {
    let (mut server, mut client) = pair(4096);
    let wr = SendRequest {
        wr_id: 5,
        op: SendOp::Send,
        offset: 0,
        len: 64,
        remote: None,
        signaled: true,
        inline: false,
    };
    client.post_send(0, &wr).unwrap();
    let mut out = [Completion::EMPTY; 4];
    for _ in 0..100 {
        // Neither side completes: the SEND waits in the socket for a receive, unacknowledged.
        assert_eq!(server.poll_cq(&mut out).unwrap(), 0);
        assert_eq!(client.poll_cq(&mut out).unwrap(), 0);
    }
    server
        .post_recv(
            0,
            &RecvRequest {
                wr_id: 9,
                offset: 0,
                len: 64,
            },
        )
        .unwrap();
    let c = drive(&mut server, &mut client, 1);
    assert_eq!((c[0].wr_id, c[0].byte_len), (9, 64));
    let c = drive(&mut client, &mut server, 1);
    assert_eq!(
        (c[0].wr_id, c[0].op),
        (5, CompletionOp::Send),
        "acknowledged once received"
    );
}

#[test]
fn a_write_completes_only_once_the_peer_has_applied_it() {
    let (mut server, mut client) = pair(1 << 16);
    client.buffer_mut(0)[..100].fill(7);
    let wr = write_req(&client, &server, 1, 0, 100, SendOp::Write);
    client.post_send(0, &wr).unwrap();
    let mut out = [Completion::EMPTY; 4];
    for _ in 0..50 {
        assert_eq!(
            client.poll_cq(&mut out).unwrap(),
            0,
            "no ack while the peer does not poll"
        );
    }
    let c = drive(&mut client, &mut server, 1);
    assert_eq!((c[0].wr_id, c[0].op), (1, CompletionOp::Write));
    assert!(server.buffer(0)[..100].iter().all(|&b| b == 7));
}

#[test]
fn read_fetches_the_peer_buffer() {
    let (mut server, mut client) = pair(1 << 20);
    for (i, b) in server.buffer_mut(0).iter_mut().enumerate() {
        *b = (i % 253) as u8;
    }
    let mut wr = write_req(&client, &server, 3, 4096, 500_000, SendOp::Read);
    wr.remote.as_mut().unwrap().addr -= 4096; // read from the peer's offset 0 into local offset 4096
    client.post_send(0, &wr).unwrap();
    let c = drive(&mut client, &mut server, 1);
    assert_eq!(
        (c[0].wr_id, c[0].op, c[0].byte_len),
        (3, CompletionOp::Read, 500_000)
    );
    let buf = client.buffer(0);
    assert!((0..500_000).all(|i| buf[4096 + i] == (i % 253) as u8));
}

#[test]
fn many_small_writes_in_flight_all_complete() {
    let (mut server, mut client) = pair(4096);
    let mut done = 0;
    let mut posted = 0u64;
    let mut out = [Completion::EMPTY; 16];
    while done < 10_000 {
        while posted < 10_000 {
            let mut wr = write_req(&client, &server, posted, 0, 2, SendOp::Write);
            wr.signaled = posted % 8 == 7;
            match client.post_send(0, &wr) {
                Ok(()) => posted += 1,
                Err(Error::QueueFull) => break,
                Err(e) => panic!("{e}"),
            }
        }
        done += 8 * client.poll_cq(&mut out).unwrap();
        server.poll_cq(&mut out).unwrap();
    }
    assert_eq!(done, 10_000);
}

#[test]
fn out_of_bounds_requests_are_refused_locally() {
    let (server, mut client) = pair(4096);
    let wr = write_req(&client, &server, 1, 0, 4096, SendOp::Write);
    let mut far = wr;
    far.remote.as_mut().unwrap().addr += 1;
    assert!(matches!(
        client.post_send(0, &far),
        Err(Error::InvalidRequest(_))
    ));
    let mut big = wr;
    big.offset = 1;
    assert!(matches!(
        client.post_send(0, &big),
        Err(Error::InvalidRequest(_))
    ));
}

#[test]
fn a_closed_peer_fails_pending_work_and_refuses_new_work() {
    // Pending: a WRITE waits for an acknowledgement that will never come.
    let (server, mut client) = pair(4096);
    let wr = write_req(&client, &server, 1, 0, 64, SendOp::Write);
    client.post_send(0, &wr).unwrap();
    drop(server);
    let mut out = [Completion::EMPTY; 4];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match client.poll_cq(&mut out) {
            Err(Error::Connection(m)) => {
                assert!(m.contains("closed"), "{m}");
                break;
            }
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => assert!(Instant::now() < deadline, "no error after the peer closed"),
        }
    }
    // Idle: the close is quiet until new work is posted.
    let (server, mut client) = pair(4096);
    let wr = write_req(&client, &server, 2, 0, 64, SendOp::Write);
    drop(server);
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        assert_eq!(client.poll_cq(&mut out).unwrap(), 0);
    }
    assert!(matches!(
        client.post_send(0, &wr),
        Err(Error::Connection(_))
    ));
}

#[test]
fn a_stranger_on_the_data_port_is_rejected() {
    let mut server = TcpEndpoint::new(cfg(Role::Server, 4096)).unwrap();
    let addr: SocketAddr = server.local_info().addr.unwrap().parse().unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n").unwrap();
    let client = TcpEndpoint::new(cfg(Role::Client, 4096)).unwrap();
    match server.connect(&client.local_info()) {
        Err(Error::Connection(m)) => assert!(m.contains("not from our roceperf peer"), "{m}"),
        other => panic!("expected a rejection, got {:?}", other.err()),
    }
}
