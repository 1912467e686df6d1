//! A raw HTTP/1.1 client over loopback for the server tests: the exact bytes sent, the status,
//! headers and (de-chunked) body received. Included by the tests that need it
//! (`#[path = "common/http.rs"] mod http;`), so each uses only part of it.
#![allow(dead_code)]

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    /// SSE `data:` payloads in order.
    pub fn events(&self) -> Vec<String> {
        let t = self.text();
        assert!(t.ends_with("\n\n"), "events end with a blank line: {t:?}");
        t.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").unwrap_or_else(|| panic!("bad event {e:?}")).to_string())
            .collect()
    }
    /// SSE `data:` payloads in order, engine-time comments (`: t=…`, a time-scaled server's
    /// stamps) skipped.
    pub fn data_events(&self) -> Vec<String> {
        let t = self.text();
        assert!(t.ends_with("\n\n"), "events end with a blank line: {t:?}");
        t.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let data = e.lines().find(|l| !l.starts_with(": t=")).unwrap_or_else(|| panic!("no data in {e:?}"));
                data.strip_prefix("data: ").unwrap_or_else(|| panic!("bad event {e:?}")).to_string()
            })
            .collect()
    }
}

pub fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_str = std::str::from_utf8(&b[..eol]).unwrap();
        let size = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

pub fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub async fn http(addr: std::net::SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = request_bytes(method, path, headers, body);
    // A server may answer (413) before reading a huge body; ignore the write error then.
    let _ = s.write_all(&req).await;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let split =
        raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(": ")).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut body = raw[split + 4..].to_vec();
    if headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked")) {
        body = dechunk(&body);
    }
    Resp { status, headers, body }
}
