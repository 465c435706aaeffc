//! Plain and TLS HTTP/1.1 clients that write requests the way kube-scheduler's
//! Go client does.

use super::Identity;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// How to reach the server: plain TCP or TLS with a given configuration.
#[derive(Clone)]
pub enum Client {
    /// HTTP/1.1 over TCP.
    Plain,
    /// HTTP/1.1 over TLS.
    Tls(Arc<rustls::ClientConfig>),
}

/// A collected response.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// The head (status line and headers), as received.
    pub head: String,
    /// The body.
    pub body: String,
}

impl Reply {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// The body as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// One open connection.
pub struct Conn {
    stream: Box<dyn Stream>,
    addr: SocketAddr,
    local: SocketAddr,
    buf: Vec<u8>,
}

impl Client {
    /// A TLS client trusting `roots`, presenting `identity` if given.
    pub fn tls(roots: &[&str], identity: Option<&Identity>) -> Client {
        let mut store = rustls::RootCertStore::empty();
        for pem in roots {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                store
                    .add(cert.expect("root PEM"))
                    .expect("root certificate");
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(store);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some(id) => {
                let chain = CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("client certificate PEM");
                let key =
                    PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes()).expect("client key PEM");
                builder
                    .with_client_auth_cert(chain, key)
                    .expect("client identity")
            }
        };
        Client::Tls(Arc::new(config))
    }

    /// Opens a connection (the TLS handshake happens on first use).
    pub fn connect(&self, addr: SocketAddr) -> io::Result<Conn> {
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        tcp.set_write_timeout(Some(Duration::from_secs(10)))?;
        let local = tcp.local_addr()?;
        let stream: Box<dyn Stream> = match self {
            Client::Plain => Box::new(tcp),
            Client::Tls(config) => {
                let name = ServerName::IpAddress(addr.ip().into());
                let conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(io::Error::other)?;
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        Ok(Conn {
            stream,
            addr,
            local,
            buf: Vec::new(),
        })
    }

    /// One request over a fresh connection (`Connection: close`).
    pub fn request(
        &self,
        addr: SocketAddr,
        method: &str,
        path: &str,
        body: &str,
    ) -> io::Result<Reply> {
        self.connect(addr)?.request(method, path, body, false)
    }

    /// `GET path`.
    pub fn get(&self, addr: SocketAddr, path: &str) -> io::Result<Reply> {
        self.request(addr, "GET", path, "")
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, addr: SocketAddr, path: &str, body: &str) -> io::Result<Reply> {
        self.request(addr, "POST", path, body)
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl Conn {
    /// The client's end of the connection (the server's peer address).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The head of a request as kube-scheduler's Go client writes it, plus
    /// `extra` header lines (each ending in `\r\n`).
    pub fn head(&self, method: &str, path: &str, len: usize, extra: &str) -> String {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: Go-http-client/1.1\r\n\
             Content-Type: application/json\r\nContent-Length: {len}\r\n\
             Accept-Encoding: gzip\r\n{extra}\r\n",
            self.addr,
        )
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Sends a request and reads its response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
        keep_alive: bool,
    ) -> io::Result<Reply> {
        let extra = if keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        };
        let head = self.head(method, path, body.len(), extra);
        self.send_raw(format!("{head}{body}").as_bytes())?;
        self.read_reply()
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads one response (`Content-Length` framed).
    pub fn read_reply(&mut self) -> io::Result<Reply> {
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed before a response head; got {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end - 4]).into_owned();
        let status = head
            .strip_prefix("HTTP/1.1 ")
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(format!("not an HTTP/1.1 response: {head:?}")))?;
        let mut reply = Reply {
            status,
            head,
            body: String::new(),
        };
        if (100..200).contains(&status) {
            // An interim answer (100 Continue): no body; the final one follows.
            self.buf.drain(..head_end);
            return Ok(reply);
        }
        let len: usize = reply
            .header("content-length")
            .ok_or_else(|| invalid(format!("no Content-Length: {}", reply.head)))?
            .parse()
            .map_err(|e| invalid(format!("bad Content-Length: {e}")))?;
        while self.buf.len() < head_end + len {
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside the body",
                ));
            }
        }
        let rest = self.buf.split_off(head_end + len);
        reply.body = String::from_utf8_lossy(&self.buf[head_end..]).into_owned();
        self.buf = rest;
        Ok(reply)
    }

    /// True when the server has closed the connection (EOF or reset);
    /// false when it sent something or the read timed out.
    pub fn is_closed(&mut self) -> bool {
        match self.fill() {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        }
    }
}
