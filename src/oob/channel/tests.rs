//! Unit tests of the out-of-band channel over loopback TCP.

use super::*;
use crate::oob::frame::{MAGIC, hello};
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn_server(port: u16) -> thread::JoinHandle<Result<Channel>> {
    spawn_server_with(port, Duration::from_secs(5))
}

/// A server accepting on `port` with a `handshake` deadline; returned once it listens.
fn spawn_server_with(port: u16, handshake: Duration) -> thread::JoinHandle<Result<Channel>> {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        Channel::accept(port, Duration::from_secs(5), handshake, || {
            tx.send(()).unwrap()
        })
    });
    rx.recv().unwrap();
    h
}

fn client(port: u16) -> Result<Channel> {
    client_with(port, Duration::from_secs(5), Duration::from_secs(5))
}

/// A client of 127.0.0.1:`port` that stops trying to connect after `connect` and gives the rest
/// (I/O, handshake) `timeout` each.
fn client_with(port: u16, connect: Duration, timeout: Duration) -> Result<Channel> {
    Channel::connect(
        "127.0.0.1",
        port,
        connect,
        timeout,
        timeout,
        |_| {},
        |_, _| {},
    )
}

/// A client and the server it connected to, on a fresh port.
fn connected() -> (Channel, Channel) {
    let port = free_port();
    let server = spawn_server(port);
    let c = client(port).unwrap();
    (c, server.join().unwrap().unwrap())
}

/// A server on a fresh port and a plain TCP connection to it, to send it what a client would not.
fn server_and_raw_peer() -> (thread::JoinHandle<Result<Channel>>, TcpStream) {
    let port = free_port();
    let server = spawn_server(port);
    (server, TcpStream::connect(("127.0.0.1", port)).unwrap())
}

#[test]
fn exchange_barrier_and_messages_in_lock_step() {
    let port = free_port();
    let server = spawn_server(port);
    let mut c = client(port).unwrap();
    let s = thread::spawn(move || {
        let mut s = server.join().unwrap().unwrap();
        let got: String = s.exchange(Step::Conn, &"from server".to_string()).unwrap();
        s.barrier(3).unwrap();
        let r: Vec<u64> = s.recv(Step::Results).unwrap();
        (got, r)
    });
    let got: String = c.exchange(Step::Conn, &"from client".to_string()).unwrap();
    c.barrier(3).unwrap();
    c.send(Step::Results, &vec![1u64, 2, 3]).unwrap();
    assert_eq!(got, "from server");
    assert_eq!(
        s.join().unwrap(),
        ("from client".to_string(), vec![1, 2, 3])
    );
}

#[test]
fn client_retries_until_the_server_is_up() {
    let port = free_port();
    let h = thread::spawn(move || client(port));
    thread::sleep(Duration::from_millis(400));
    let server = spawn_server(port);
    assert!(h.join().unwrap().is_ok());
    assert!(server.join().unwrap().is_ok());
}

#[test]
fn client_gives_up_naming_the_address() {
    let port = free_port();
    let err = client_with(port, Duration::from_millis(300), Duration::from_secs(1))
        .err()
        .unwrap();
    assert!(matches!(err, Error::Unreachable { .. }));
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

#[test]
fn garbage_hello_is_named() {
    let (server, mut s) = server_and_raw_peer();
    s.write_all(b"\x16\x03\x01garbage bytes here").unwrap();
    let err = server.join().unwrap().err().unwrap();
    assert!(matches!(err, Error::Garbage { .. }), "{err}");
    assert!(err.to_string().contains("16 03 01"), "{err}");
}

#[test]
fn short_hello_then_close_is_garbage_not_a_hang() {
    let (server, mut s) = server_and_raw_peer();
    s.write_all(b"rocep").unwrap();
    drop(s);
    let err = server.join().unwrap().err().unwrap();
    assert!(matches!(err, Error::Garbage { .. }), "{err}");
}

#[test]
fn wrong_version_is_named() {
    let (server, mut s) = server_and_raw_peer();
    let mut h = hello();
    h[9] = 99;
    s.write_all(&h).unwrap();
    let err = server.join().unwrap().err().unwrap();
    assert!(matches!(err, Error::Version { theirs: 99, .. }), "{err}");
}

#[test]
fn oversized_or_unexpected_messages_are_garbage() {
    let (mut c, mut s) = connected();
    c.stream.write_all(&u32::MAX.to_be_bytes()).unwrap();
    assert!(matches!(
        s.recv::<u64>(Step::Barrier),
        Err(Error::Garbage { .. })
    ));
    c.send(Step::Results, &1u64).unwrap();
    let err = s.recv::<u64>(Step::Barrier).err().unwrap();
    assert!(err.to_string().contains("\"results\""), "{err}");
}

#[test]
fn abort_reaches_the_peer_with_its_reason() {
    let (mut c, mut s) = connected();
    c.abort("no RDMA device", Failure::Setup);
    match s.recv::<u64>(Step::Barrier) {
        Err(Error::PeerAborted {
            reason, failure, ..
        }) => {
            assert_eq!(reason, "no RDMA device");
            assert_eq!(failure, Failure::Setup);
        }
        other => panic!("{:?}", other.err()),
    }
    c.abort("retry exceeded", Failure::Test);
    match s.recv::<u64>(Step::Results) {
        Err(Error::PeerAborted { failure, .. }) => assert_eq!(failure, Failure::Test),
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn peer_has_data_sees_a_message_or_a_close() {
    let (mut c, s) = connected();
    assert!(!s.peer_has_data().unwrap());
    c.send(Step::Results, &1u64).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s.peer_has_data().unwrap() {
        assert!(Instant::now() < deadline);
    }
}

#[test]
fn a_dripping_peer_meets_one_handshake_deadline_naming_what_it_sent() {
    let port = free_port();
    let server = spawn_server_with(port, Duration::from_millis(700));
    let mut peer = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let t0 = Instant::now();
    // One byte of the hello every 200 ms: each read gets something long before its own timeout.
    for b in &MAGIC[..5] {
        if peer.write_all(&[*b]).is_err() {
            break;
        }
        thread::sleep(Duration::from_millis(200));
    }
    let err = server.join().unwrap().err().unwrap();
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    match &err {
        Error::Handshake { got, want, .. } => {
            assert!((3..=4).contains(got), "{err}");
            assert_eq!(*want, HELLO_LEN);
        }
        other => panic!("{other}"),
    }
    assert!(
        err.to_string().contains("during the hello it sent"),
        "{err}"
    );
}

#[test]
fn the_handshake_deadline_ends_with_the_handshake() {
    let port = free_port();
    let server = spawn_server_with(port, Duration::from_millis(300));
    let mut c = client(port).unwrap();
    let mut s = server.join().unwrap().unwrap();
    s.end_handshake().unwrap();
    thread::sleep(Duration::from_millis(500));
    c.send(Step::Barrier, &1u64).unwrap();
    assert_eq!(s.recv::<u64>(Step::Barrier).unwrap(), 1);
}
