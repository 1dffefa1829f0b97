//! Where the kill -9 runs strike: at progress points, not at random times, so that every
//! crash lands while messages flow, however slow or fast the machine.

/// With `total` messages and `kills` crashes, the counts of arrived messages after which
/// each crash comes: k·total/(kills+1) for k = 1..=kills, so the flow is split into
/// `kills + 1` equal parts and the last part runs without a crash.
pub fn kill_points(total: usize, kills: usize) -> Vec<usize> {
    (1..=kills).map(|k| k * total / (kills + 1)).collect()
}
