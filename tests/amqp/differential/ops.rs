//! What the clients of a differential scenario do: the operations, drawn from a seed, and
//! their text form — one line per operation, `name key=value …`, joined by `; ` into the
//! replay script that [`parse`] reads back.
//!
//! Every operation is meaningful in any state (an acknowledgement of a channel that holds
//! nothing, a cancel without a consumer are skipped), so any sub-list of a scenario is a
//! scenario too: shrinking drops operations freely.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// Channel slots of a scenario; slot `s` is channel `s % 2` of connection `s / 2`.
pub const CHANNELS: usize = 6;
/// Connections of a scenario.
pub const CONNECTIONS: usize = CHANNELS / 2;
/// Durable queues of a scenario.
pub const QUEUES: usize = 3;
/// Bounds of the number of operations of a generated scenario.
const LENGTH: std::ops::RangeInclusive<usize> = 20..=60;

/// How a publish is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// basic.publish with no confirm awaited (inside a transaction when the channel has
    /// one, then committed).
    Plain,
    /// Under publisher confirms, each confirm awaited.
    Confirm,
    /// Mandatory, under confirms, to a key no queue is bound to: basic.return.
    Unroutable,
    /// Inside tx.select, then tx.commit.
    Commit,
    /// Inside tx.select, then tx.rollback.
    Rollback,
}

/// The names of [`How`] in scripts, in declaration order.
const HOWS: [(How, &str); 5] = [
    (How::Plain, "plain"),
    (How::Confirm, "confirm"),
    (How::Unroutable, "unroutable"),
    (How::Commit, "commit"),
    (How::Rollback, "rollback"),
];

/// How a connection's socket is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// At once: what the client wrote may or may not reach the broker.
    Abrupt,
    /// Everything the client wrote reaches the broker, then the end of the stream.
    Flushed,
    /// After a round trip on each of its channels, flushed.
    Synced,
}

/// The names of [`Cut`] in scripts, in declaration order.
const CUTS: [(Cut, &str); 3] = [
    (Cut::Abrupt, "abrupt"),
    (Cut::Flushed, "flushed"),
    (Cut::Synced, "synced"),
];

/// One thing a client does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Publishes `count` persistent messages to queue `queue`.
    Publish {
        ch: usize,
        queue: usize,
        how: How,
        count: usize,
    },
    /// basic.qos `prefetch` (per consumer; 0: no limit), then basic.consume; skipped when
    /// the channel or the queue has a consumer (one consumer per queue keeps what each
    /// consumer holds the same on both brokers).
    Consume {
        ch: usize,
        queue: usize,
        prefetch: u16,
    },
    /// basic.get, with or without acknowledgement.
    Get {
        ch: usize,
        queue: usize,
        no_ack: bool,
    },
    /// basic.ack of the `pick`-th delivery the channel holds (modulo their number).
    Ack {
        ch: usize,
        pick: usize,
        multiple: bool,
    },
    /// basic.nack of the `pick`-th delivery the channel holds.
    Nack {
        ch: usize,
        pick: usize,
        multiple: bool,
        requeue: bool,
    },
    /// basic.reject of the `pick`-th delivery the channel holds.
    Reject {
        ch: usize,
        pick: usize,
        requeue: bool,
    },
    /// basic.ack of a delivery tag the channel never had: a channel exception.
    AckUnknown { ch: usize },
    /// basic.cancel of the channel's consumer.
    Cancel { ch: usize },
    /// basic.qos on the channel (applies to its later consumers only).
    Qos { ch: usize, prefetch: u16 },
    /// basic.recover with requeue.
    Recover { ch: usize },
    /// channel.close; `rush`: without waiting for the previous operation to settle, so
    /// deliveries may be in flight to the channel as it closes.
    CloseChannel { ch: usize, rush: bool },
    /// connection.close; `rush` as for [`Op::CloseChannel`].
    CloseConnection { conn: usize, rush: bool },
    /// The connection's socket cut on both sides as `cut` says; `rush` as for
    /// [`Op::CloseChannel`].
    Drop { conn: usize, cut: Cut, rush: bool },
    /// A broker restart (on RabbitMQ: every connection cut, see [`super::run`]).
    Restart,
}

impl Op {
    /// A random operation.
    fn random(rng: &mut fastrand::Rng) -> Op {
        let ch = rng.usize(..CHANNELS);
        let conn = rng.usize(..CONNECTIONS);
        let queue = rng.usize(..QUEUES);
        let pick = rng.usize(..8);
        let prefetch = rng.u16(0..=4);
        match rng.u32(..100) {
            0..30 => {
                // Plain and confirmed publishes most, then transactions, then returns.
                const WEIGHTED: [usize; 10] = [0, 0, 0, 1, 1, 1, 2, 3, 3, 4];
                Op::Publish {
                    ch,
                    queue,
                    how: HOWS[WEIGHTED[rng.usize(..WEIGHTED.len())]].0,
                    count: rng.usize(1..=4),
                }
            }
            30..40 => Op::Consume {
                ch,
                queue,
                prefetch,
            },
            40..48 => Op::Get {
                ch,
                queue,
                no_ack: rng.bool(),
            },
            48..60 => Op::Ack {
                ch,
                pick,
                multiple: rng.u32(..3) == 0,
            },
            60..66 => Op::Nack {
                ch,
                pick,
                multiple: rng.bool(),
                requeue: rng.bool(),
            },
            66..71 => Op::Reject {
                ch,
                pick,
                requeue: rng.bool(),
            },
            71..73 => Op::AckUnknown { ch },
            73..77 => Op::Cancel { ch },
            77..80 => Op::Qos { ch, prefetch },
            80..84 => Op::Recover { ch },
            84..89 => Op::CloseChannel {
                ch,
                rush: rng.bool(),
            },
            89..92 => Op::CloseConnection {
                conn,
                rush: rng.bool(),
            },
            92..98 => Op::Drop {
                conn,
                cut: CUTS[rng.usize(..CUTS.len())].0,
                rush: rng.bool(),
            },
            _ => Op::Restart,
        }
    }

    /// Whether the operation before this one must not be waited for.
    pub fn rushes(&self) -> bool {
        matches!(
            self,
            Op::CloseChannel { rush: true, .. }
                | Op::CloseConnection { rush: true, .. }
                | Op::Drop { rush: true, .. }
        )
    }
}

/// The scenario of `seed`: 20 to 60 operations.
pub fn generate(seed: u64) -> Vec<Op> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let len = rng.usize(LENGTH);
    (0..len).map(|_| Op::random(&mut rng)).collect()
}

/// The script name of `value` among `names`.
fn name_of<T: PartialEq>(names: &[(T, &'static str)], value: &T) -> &'static str {
    names.iter().find(|(v, _)| v == value).unwrap().1
}

/// The value named `name` among `names`.
fn named<T: Copy>(names: &[(T, &str)], name: &str, what: &str) -> Result<T, String> {
    (names.iter())
        .find(|(_, n)| *n == name)
        .map(|(v, _)| *v)
        .ok_or_else(|| format!("unknown {what} '{name}'"))
}

impl fmt::Display for How {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(name_of(&HOWS, self))
    }
}

impl FromStr for How {
    type Err = String;

    fn from_str(s: &str) -> Result<How, String> {
        named(&HOWS, s, "publish kind")
    }
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(name_of(&CUTS, self))
    }
}

impl FromStr for Cut {
    type Err = String;

    fn from_str(s: &str) -> Result<Cut, String> {
        named(&CUTS, s, "cut")
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Publish {
                ch,
                queue,
                how,
                count,
            } => write!(f, "publish ch={ch} q={queue} how={how} n={count}"),
            Op::Consume {
                ch,
                queue,
                prefetch,
            } => write!(f, "consume ch={ch} q={queue} prefetch={prefetch}"),
            Op::Get { ch, queue, no_ack } => write!(f, "get ch={ch} q={queue} no_ack={no_ack}"),
            Op::Ack { ch, pick, multiple } => {
                write!(f, "ack ch={ch} pick={pick} multiple={multiple}")
            }
            Op::Nack {
                ch,
                pick,
                multiple,
                requeue,
            } => write!(
                f,
                "nack ch={ch} pick={pick} multiple={multiple} requeue={requeue}"
            ),
            Op::Reject { ch, pick, requeue } => {
                write!(f, "reject ch={ch} pick={pick} requeue={requeue}")
            }
            Op::AckUnknown { ch } => write!(f, "ack_unknown ch={ch}"),
            Op::Cancel { ch } => write!(f, "cancel ch={ch}"),
            Op::Qos { ch, prefetch } => write!(f, "qos ch={ch} prefetch={prefetch}"),
            Op::Recover { ch } => write!(f, "recover ch={ch}"),
            Op::CloseChannel { ch, rush } => write!(f, "close_channel ch={ch} rush={rush}"),
            Op::CloseConnection { conn, rush } => {
                write!(f, "close_connection conn={conn} rush={rush}")
            }
            Op::Drop { conn, cut, rush } => write!(f, "drop conn={conn} cut={cut} rush={rush}"),
            Op::Restart => f.write_str("restart"),
        }
    }
}

/// The replay script of `ops`.
pub fn script(ops: &[Op]) -> String {
    ops.iter().map(Op::to_string).collect::<Vec<_>>().join("; ")
}

/// The operations of a replay script.
///
/// # Errors
/// A sentence naming the operation that does not parse.
pub fn parse(script: &str) -> Result<Vec<Op>, String> {
    script
        .split(';')
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| parse_op(line).map_err(|e| format!("'{line}': {e}")))
        .collect()
}

/// One operation of a script.
fn parse_op(line: &str) -> Result<Op, String> {
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or_default();
    let fields: HashMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
    let field = |key: &str| -> Result<&str, String> {
        fields
            .get(key)
            .copied()
            .ok_or_else(|| format!("missing {key}="))
    };
    let num = |key: &str| -> Result<usize, String> {
        let v = field(key)?;
        v.parse().map_err(|_| format!("{key}={v} is not a number"))
    };
    let flag = |key: &str| -> Result<bool, String> {
        let v = field(key)?;
        v.parse()
            .map_err(|_| format!("{key}={v} is not true or false"))
    };
    let slot = |key: &str, below: usize| -> Result<usize, String> {
        let v = num(key)?;
        (v < below)
            .then_some(v)
            .ok_or_else(|| format!("{key}={v} is not below {below}"))
    };
    let prefetch = || -> Result<u16, String> {
        u16::try_from(num("prefetch")?).map_err(|_| "prefetch= over 65535".to_owned())
    };
    Ok(match name {
        "publish" => Op::Publish {
            ch: slot("ch", CHANNELS)?,
            queue: slot("q", QUEUES)?,
            how: field("how")?.parse()?,
            count: num("n")?,
        },
        "consume" => Op::Consume {
            ch: slot("ch", CHANNELS)?,
            queue: slot("q", QUEUES)?,
            prefetch: prefetch()?,
        },
        "get" => Op::Get {
            ch: slot("ch", CHANNELS)?,
            queue: slot("q", QUEUES)?,
            no_ack: flag("no_ack")?,
        },
        "ack" => Op::Ack {
            ch: slot("ch", CHANNELS)?,
            pick: num("pick")?,
            multiple: flag("multiple")?,
        },
        "nack" => Op::Nack {
            ch: slot("ch", CHANNELS)?,
            pick: num("pick")?,
            multiple: flag("multiple")?,
            requeue: flag("requeue")?,
        },
        "reject" => Op::Reject {
            ch: slot("ch", CHANNELS)?,
            pick: num("pick")?,
            requeue: flag("requeue")?,
        },
        "ack_unknown" => Op::AckUnknown {
            ch: slot("ch", CHANNELS)?,
        },
        "cancel" => Op::Cancel {
            ch: slot("ch", CHANNELS)?,
        },
        "qos" => Op::Qos {
            ch: slot("ch", CHANNELS)?,
            prefetch: prefetch()?,
        },
        "recover" => Op::Recover {
            ch: slot("ch", CHANNELS)?,
        },
        "close_channel" => Op::CloseChannel {
            ch: slot("ch", CHANNELS)?,
            rush: flag("rush")?,
        },
        "close_connection" => Op::CloseConnection {
            conn: slot("conn", CONNECTIONS)?,
            rush: flag("rush")?,
        },
        "drop" => Op::Drop {
            conn: slot("conn", CONNECTIONS)?,
            cut: field("cut")?.parse()?,
            rush: flag("rush")?,
        },
        "restart" => Op::Restart,
        other => return Err(format!("unknown operation '{other}'")),
    })
}
