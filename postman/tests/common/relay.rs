//! A UDP relay on loopback between two postmen, switchable at run time: it passes datagrams,
//! drops them all (a cut link), or holds them (bounded) and lets them go late, in one burst,
//! when switched back to passing.
//!
//! The usual UDP proxy shape: each client source address seen on the relay's port gets its own
//! upstream socket, so the upstream sees one peer per client and its replies find their way
//! back.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// What the relay does with a datagram, either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forwards it at once.
    Pass,
    /// Discards it: the link is cut.
    Drop,
    /// Keeps it (up to [`HOLD_BOUND`] datagrams, the rest discarded) until the next `Pass`.
    Hold,
}

/// How many datagrams a holding relay keeps; beyond this it drops.
pub const HOLD_BOUND: usize = 512;

/// A datagram held back: the socket it leaves by, where it goes, its bytes.
struct Held {
    via: Arc<UdpSocket>,
    to: SocketAddr,
    bytes: Vec<u8>,
}

struct State {
    mode: Mode,
    held: VecDeque<Held>,
    /// Datagrams discarded (cut, or beyond the hold bound), for the test's report.
    dropped: u64,
}

/// A running relay; its tasks stop when it is dropped.
pub struct Relay {
    /// The loopback port clients send to.
    pub port: u16,
    state: Arc<Mutex<State>>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Relay {
    /// Relays datagrams sent to a fresh loopback port on to `upstream`, and the replies back.
    pub async fn start(upstream: SocketAddr) -> Relay {
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let port = front.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            mode: Mode::Pass,
            held: VecDeque::new(),
            dropped: 0,
        }));
        let tasks = Arc::new(Mutex::new(Vec::new()));
        let front_task = {
            let (state, tasks) = (Arc::clone(&state), Arc::clone(&tasks));
            tokio::spawn(async move {
                let mut sessions: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
                let mut buf = vec![0u8; 65_536];
                loop {
                    let Ok((n, client)) = front.recv_from(&mut buf).await else {
                        continue;
                    };
                    let up = match sessions.get(&client) {
                        Some(up) => Arc::clone(up),
                        None => {
                            let up = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
                            sessions.insert(client, Arc::clone(&up));
                            let back = tokio::spawn(replies(
                                Arc::clone(&up),
                                Arc::clone(&front),
                                client,
                                Arc::clone(&state),
                            ));
                            tasks.lock().unwrap().push(back);
                            up
                        }
                    };
                    forward(&state, &up, upstream, &buf[..n]).await;
                }
            })
        };
        tasks.lock().unwrap().push(front_task);
        Relay { port, state, tasks }
    }

    /// Switches the relay; switching to [`Mode::Pass`] releases what was held, in a burst.
    pub fn set(&self, mode: Mode) {
        let mut state = self.state.lock().unwrap();
        state.mode = mode;
        if mode == Mode::Pass {
            for held in std::mem::take(&mut state.held) {
                // Loopback rarely refuses; a refused datagram is one more loss, as on a network.
                if held.via.try_send_to(&held.bytes, held.to).is_err() {
                    state.dropped += 1;
                }
            }
        }
    }

    /// Datagrams discarded so far (cut, or held beyond the bound).
    pub fn dropped(&self) -> u64 {
        self.state.lock().unwrap().dropped
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Carries the upstream's replies on `up` back to `client` through `front`.
async fn replies(
    up: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    state: Arc<Mutex<State>>,
) {
    let mut buf = vec![0u8; 65_536];
    loop {
        // The upstream not listening (its postman killed) shows as an error here: keep going.
        let Ok((n, _)) = up.recv_from(&mut buf).await else {
            continue;
        };
        forward(&state, &front, client, &buf[..n]).await;
    }
}

/// Sends `bytes` to `to` by `via`, or holds or drops it, as the relay's mode says.
async fn forward(state: &Mutex<State>, via: &Arc<UdpSocket>, to: SocketAddr, bytes: &[u8]) {
    {
        let mut state = state.lock().unwrap();
        match state.mode {
            Mode::Pass => {}
            Mode::Drop => {
                state.dropped += 1;
                return;
            }
            Mode::Hold => {
                if state.held.len() < HOLD_BOUND {
                    state.held.push_back(Held {
                        via: Arc::clone(via),
                        to,
                        bytes: bytes.to_vec(),
                    });
                } else {
                    state.dropped += 1;
                }
                return;
            }
        }
    }
    // Loopback sends fail only when the receiver is gone: a loss like any other.
    let _sent = via.send_to(bytes, to).await;
}
