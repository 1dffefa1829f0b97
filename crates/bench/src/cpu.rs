//! CPU time of processes, read from `/proc`, so a benchmark can say how much processor
//! time a broker (and the benchmark's own client) spent per message.
//!
//! On a machine whose cores are shared by the client and the broker, throughput says as
//! much about the client as about the broker; CPU time per message is each party's own
//! cost, whatever else the machine runs.

use std::time::Duration;

/// Linux reports process times in clock ticks of `USER_HZ`, which is 100 on every
/// architecture Linux supports in practice (`sysconf(_SC_CLK_TCK)`).
const TICKS_PER_SECOND: u64 = 100;

/// User plus system CPU time of process `pid` (all its threads) so far; `None` when it
/// cannot be read (no such process, or no `/proc`).
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_of_stat(&stat)
}

/// The CPU time in a `/proc/PID/stat` line: fields 14 (utime) and 15 (stime), counted after
/// the command name, which is in parentheses and may itself hold spaces.
fn cpu_of_stat(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis(
        (utime + stime) * 1000 / TICKS_PER_SECOND,
    ))
}

/// CPU time of this process and, optionally, of a broker process, between two points.
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    broker: Option<u32>,
    bench_at: Option<Duration>,
    broker_at: Option<Duration>,
}

/// CPU spent between a [`CpuMeter::start`] and its [`CpuMeter::per_message`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuPerMessage {
    /// This process (the benchmark's client, and in `ferry bench bridge` Ferry's bridge),
    /// µs per message.
    pub bench_us: Option<f64>,
    /// The broker process, µs per message.
    pub broker_us: Option<f64>,
}

impl CpuMeter {
    /// Starts measuring this process and `broker` (a PID), if given.
    pub fn start(broker: Option<u32>) -> Self {
        Self {
            broker,
            bench_at: process_cpu(std::process::id()),
            broker_at: broker.and_then(process_cpu),
        }
    }

    /// CPU per message since [`CpuMeter::start`], for `messages` messages.
    pub fn per_message(&self, messages: u64) -> CpuPerMessage {
        let per = |before: Option<Duration>, now: Option<Duration>| {
            let spent = now?.checked_sub(before?)?;
            Some(spent.as_secs_f64() * 1e6 / messages.max(1) as f64)
        };
        CpuPerMessage {
            bench_us: per(self.bench_at, process_cpu(std::process::id())),
            broker_us: per(self.broker_at, self.broker.and_then(process_cpu)),
        }
    }
}

impl std::fmt::Display for CpuPerMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |us| format!("{us:.1}"));
        write!(
            f,
            "CPU µs/msg: broker {}, bench process {}",
            show(self.broker_us),
            show(self.bench_us)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_user_and_system_ticks_after_a_name_with_spaces() {
        let stat = "4242 (tokio rt) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(cpu_of_stat(stat), Some(Duration::from_millis(3000)));
    }

    #[test]
    fn this_process_stat_line_parses() {
        assert!(process_cpu(std::process::id()).is_some());
    }
}
