//! The HTTP/1.1 client against scripted TCP servers: framing, pooling, retries and errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// What a scripted server does with the next request on a connection.
#[derive(Clone)]
enum Act {
    /// Writes these pieces, pausing between them so the client reads them apart.
    Reply(Vec<&'static [u8]>),
    /// Writes the pieces, then closes the connection.
    ReplyClose(Vec<&'static [u8]>),
    /// Reads the request and closes without answering.
    Drop,
}

/// A real TCP server following `script` (one list per accepted connection). Returns its URL,
/// the requests it read (head and decoded body) and the count of connections accepted.
async fn server(script: Vec<Vec<Act>>) -> (String, Arc<Mutex<Vec<(String, Vec<u8>)>>>, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/base/", l.local_addr().unwrap());
    let (seen, accepted) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicUsize::new(0)));
    let (s2, a2) = (seen.clone(), accepted.clone());
    tokio::spawn(async move {
        for acts in script {
            let (mut c, _) = l.accept().await.unwrap();
            a2.fetch_add(1, Ordering::SeqCst);
            let seen = s2.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                for act in acts {
                    let Some(req) = read_request(&mut c, &mut buf).await else { return };
                    seen.lock().unwrap().push(req);
                    let (pieces, close) = match act {
                        Act::Reply(p) => (p, false),
                        Act::ReplyClose(p) => (p, true),
                        Act::Drop => return,
                    };
                    for p in pieces {
                        c.write_all(p).await.unwrap();
                        tokio::time::sleep(Duration::from_millis(15)).await;
                    }
                    if close {
                        return;
                    }
                }
                // Stay open until the client closes.
                let _ = c.read(&mut [0u8; 1]).await;
            });
        }
    });
    (url, seen, accepted)
}

/// One request from `c` (bytes past it stay in `buf`): head text and body, sized or chunked.
async fn read_request(c: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut b = [0u8; 4096];
        let n = c.read(&mut b).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    buf.drain(..head_end);
    let lower = head.to_ascii_lowercase();
    let mut body = Vec::new();
    if let Some(l) = lower.lines().find_map(|l| l.strip_prefix("content-length: ")) {
        let n: usize = l.trim().parse().unwrap();
        while buf.len() < n {
            let mut b = [0u8; 65536];
            let k = c.read(&mut b).await.ok()?;
            buf.extend_from_slice(&b[..k]);
        }
        body = buf.drain(..n).collect();
    } else {
        // Chunked: until the last chunk.
        loop {
            if let Some(i) = buf.windows(5).position(|w| w == b"0\r\n\r\n") {
                let raw: Vec<u8> = buf.drain(..i + 5).collect();
                let mut rest = &raw[..];
                while let Some(nl) = rest.windows(2).position(|w| w == b"\r\n") {
                    let size = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap(), 16).unwrap();
                    if size == 0 {
                        break;
                    }
                    body.extend_from_slice(&rest[nl + 2..nl + 2 + size]);
                    rest = &rest[nl + 2 + size + 2..];
                }
                break;
            }
            let mut b = [0u8; 65536];
            let k = c.read(&mut b).await.ok()?;
            if k == 0 {
                return None;
            }
            buf.extend_from_slice(&b[..k]);
        }
    }
    Some((head, body))
}

async fn body_of(r: &mut Response<'_>) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    while let Some(d) = r.data().await? {
        out.extend_from_slice(d);
    }
    Ok(out)
}

/// A hung exchange fails the test instead of stalling the suite.
async fn within(f: impl Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(30), f).await.expect("the exchange hung")
}

fn client(url: &str) -> Client {
    Client::for_url(url, Duration::from_secs(5)).expect("an http URL")
}

fn ready(parts: &[&'static [u8]]) -> Body {
    Body::Ready(parts.iter().map(|p| Bytes::from_static(p)).collect())
}

const CHUNKED: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nX-Sweep-Arrival-Ns: 42\r\ntransfer-encoding: chunked\r\n\r\n",
    b"0",
    b"f;ext=1\r\ndata: {\"a\":1",
    b"}\n\n\r",
    b"\n6\r\ndata: \r\n6\r\n[D",
    b"ONE]\r\n0\r\nx-trailer: 1\r\n",
    b"\r\n",
];

#[tokio::test]
async fn chunked_replies_read_whole_however_split_and_the_connection_is_reused() {
    within(async {
        let (url, seen, accepted) = server(vec![vec![Act::Reply(CHUNKED.to_vec()), Act::Reply(CHUNKED.to_vec())]]).await;
        let c = client(&url);
        for n in 0..2 {
            let mut r = c.post("/v1/chat/completions", &[("x-correlation-id", "abc")], ready(&[b"{\"m\":", b"[1,2]}"])).await.unwrap();
            assert_eq!((r.status, r.header("x-sweep-arrival-ns")), (200, Some("42")));
            assert_eq!(body_of(&mut r).await.unwrap(), b"data: {\"a\":1}\n\ndata: [DONE]", "request {n}");
            assert!(r.data().await.unwrap().is_none());
            drop(r);
            assert_eq!(c.idle_connections(), 1, "back in the pool after request {n}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one keep-alive connection for both");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        let (head, body) = &seen[0];
        assert!(head.starts_with("POST /base/v1/chat/completions HTTP/1.1\r\n"), "{head}");
        assert!(head.contains(&format!("host: {}\r\n", url.trim_start_matches("http://").trim_end_matches("/base/"))), "{head}");
        assert!(head.contains("x-correlation-id: abc\r\n") && head.contains("content-length: 11\r\n"), "{head}");
        assert_eq!(body, b"{\"m\":[1,2]}");
    })
    .await;
}

#[tokio::test]
async fn sized_and_close_delimited_bodies_and_error_replies() {
    within(async {
        let sized: Vec<&[u8]> =
            vec![b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 25\r\n\r\n{\"error\":", b"{\"message\":\"x\"}}"];
        let close: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\n\r\nall of ", b"it"];
        let (url, _, accepted) = server(vec![vec![Act::Reply(sized), Act::ReplyClose(close)]]).await;
        let c = client(&url);
        let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
        assert_eq!(r.status, 500);
        assert_eq!(r.text().await.unwrap(), "{\"error\":{\"message\":\"x\"}}");
        drop(r);
        assert_eq!(c.idle_connections(), 1);
        let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
        assert_eq!(body_of(&mut r).await.unwrap(), b"all of it");
        drop(r);
        assert_eq!(c.idle_connections(), 0, "a close-delimited body ends its connection");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    })
    .await;
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_replaced() {
    within(async {
        let ok: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"];
        // First connection: one reply, then it drops the next request unanswered (a keep-alive
        // timeout racing the request); the second answers.
        let (url, seen, accepted) =
            server(vec![vec![Act::Reply(ok.clone()), Act::Drop], vec![Act::Reply(ok.clone()), Act::Reply(ok.clone())]]).await;
        let c = client(&url);
        for _ in 0..2 {
            let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
            assert_eq!(body_of(&mut r).await.unwrap(), b"ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        assert_eq!(seen.lock().unwrap().len(), 3, "the dropped request was sent again on a new connection");
        // A connection closed while idle is noticed before use: no request is lost on it.
        let (url, seen, accepted) = server(vec![vec![Act::ReplyClose(ok.clone())], vec![Act::Reply(ok.clone())]]).await;
        let c = client(&url);
        let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
        assert_eq!(body_of(&mut r).await.unwrap(), b"ok");
        drop(r);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
        assert_eq!(body_of(&mut r).await.unwrap(), b"ok");
        assert_eq!((accepted.load(Ordering::SeqCst), seen.lock().unwrap().len()), (2, 2));
    })
    .await;
}

#[tokio::test]
async fn truncated_bodies_bad_heads_and_refused_connections_are_errors() {
    within(async {
        let cut: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nonly part"];
        let bad: Vec<&[u8]> = vec![b"HTTP/1.1 2x0 OK\r\n\r\n"];
        let (url, _, _) = server(vec![vec![Act::ReplyClose(cut)], vec![Act::Reply(bad)], vec![Act::Drop]]).await;
        let c = client(&url);
        let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
        let e = body_of(&mut r).await.unwrap_err();
        assert!(matches!(e, Error::Body(_)) && e.to_string().contains("closed before the end"), "{e}");
        drop(r);
        let e = c.post("/p", &[], ready(&[b"{}"])).await.err().expect("a malformed head");
        assert!(matches!(e, Error::Request(_)) && e.to_string().contains("malformed response head"), "{e}");
        // A new connection closed with no answer is not retried.
        let e = c.post("/p", &[], ready(&[b"{}"])).await.err().expect("no answer");
        assert!(e.to_string().contains("closed before a response"), "{e}");
        // Nothing listens there any more.
        let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
        let e = client(&format!("http://127.0.0.1:{port}")).post("/p", &[], ready(&[b"{}"])).await.err().expect("refused");
        assert!(matches!(e, Error::Connect(_)), "{e}");
        assert!(Client::for_url("https://example.com", Duration::from_secs(1)).is_none(), "https goes through reqwest");
    })
    .await;
}

#[tokio::test]
async fn a_body_built_later_is_sent_chunked_after_the_head() {
    within(async {
        let ok: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"];
        let (url, seen, _) = server(vec![vec![Act::Reply(ok)]]).await;
        let c = client(&url);
        let body = Body::Later(Box::pin(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(vec![Bytes::from_static(b"{\"a\":"), Bytes::new(), Bytes::from(vec![b'7'; 70_000]), Bytes::from_static(b"}")])
        }));
        let mut r = c.post("/p", &[], body).await.unwrap();
        assert!(r.data().await.unwrap().is_none(), "an empty body");
        let seen = seen.lock().unwrap();
        assert!(seen[0].0.contains("transfer-encoding: chunked\r\n"), "{}", seen[0].0);
        assert_eq!(seen[0].1.len(), 5 + 70_000 + 1);
        assert!(seen[0].1.starts_with(b"{\"a\":7777") && seen[0].1.ends_with(b"77}"));
    })
    .await;
}
