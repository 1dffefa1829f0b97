//! Measures redb against fjall on the write pattern Ferry's embedded engine gives its
//! storage crate: one durable (fsynced) write batch per group commit, holding the keys a
//! stage touches — 1 KiB bodies and small ready/in-flight index keys — then leasing from
//! the head of the ready index and acknowledging.
//!
//! Run: `cargo run --release --manifest-path tools/storage-choice/Cargo.toml [messages] [batch]`
//! The result chose the embedded engine's storage crate; see `docs/benchmarks.md`.

use std::time::Instant;

const BODY: usize = 1024;

fn body_key(i: u64) -> Vec<u8> {
    let mut k = b"s\x01b".to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn ready_key(i: u64) -> Vec<u8> {
    let mut k = b"s\x01r\xff".to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn flight_key(i: u64) -> Vec<u8> {
    let mut k = b"s\x01f\xff".to_vec();
    k.extend_from_slice(&i.to_be_bytes());
    k
}

const READY_BEGIN: &[u8] = b"s\x01r";
const READY_END: &[u8] = b"s\x01s";

/// The operations a group-commit batch needs from a storage crate.
trait Engine {
    fn name(&self) -> &'static str;
    /// Applies puts and deletes atomically and durably (fsync before returning).
    fn commit(&mut self, puts: &[(Vec<u8>, Vec<u8>)], dels: &[Vec<u8>]);
    /// The first `limit` keys of `[begin, end)` with their values.
    fn scan(&self, begin: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)>;
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
}

struct Redb(redb::Database);
const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("kv");

impl Engine for Redb {
    fn name(&self) -> &'static str {
        "redb 4"
    }
    fn commit(&mut self, puts: &[(Vec<u8>, Vec<u8>)], dels: &[Vec<u8>]) {
        let tx = self.0.begin_write().unwrap();
        {
            let mut t = tx.open_table(TABLE).unwrap();
            for (k, v) in puts {
                t.insert(k.as_slice(), v.as_slice()).unwrap();
            }
            for k in dels {
                t.remove(k.as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
    }
    fn scan(&self, begin: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        use redb::ReadableDatabase;
        let tx = self.0.begin_read().unwrap();
        let t = match tx.open_table(TABLE) {
            Ok(t) => t,
            Err(_) => return Vec::new(),
        };
        t.range(begin..end)
            .unwrap()
            .take(limit)
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.value().to_vec(), v.value().to_vec())
            })
            .collect()
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        use redb::ReadableDatabase;
        let tx = self.0.begin_read().unwrap();
        let t = tx.open_table(TABLE).ok()?;
        t.get(key).unwrap().map(|v| v.value().to_vec())
    }
}

struct Fjall {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

impl Engine for Fjall {
    fn name(&self) -> &'static str {
        "fjall 3"
    }
    fn commit(&mut self, puts: &[(Vec<u8>, Vec<u8>)], dels: &[Vec<u8>]) {
        let mut b = self.db.batch();
        for (k, v) in puts {
            b.insert(&self.ks, k.as_slice(), v.as_slice());
        }
        for k in dels {
            b.remove(&self.ks, k.as_slice());
        }
        b.commit().unwrap();
        self.db.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    fn scan(&self, begin: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        use fjall::Readable;
        let snap = self.db.snapshot();
        snap.range(&self.ks, begin..end)
            .take(limit)
            .map(|g| {
                let (k, v) = g.into_inner().unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect()
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.ks.get(key).unwrap().map(|v| v.to_vec())
    }
}

fn rate(n: u64, t: Instant) -> String {
    format!("{:>9.0} msg/s", n as f64 / t.elapsed().as_secs_f64())
}

/// Appends `n` messages in durable batches of `batch`.
fn append(e: &mut dyn Engine, from: u64, n: u64, batch: u64) {
    let body = vec![7u8; BODY];
    let mut i = from;
    while i < from + n {
        let end = (i + batch).min(from + n);
        let mut puts = Vec::with_capacity(2 * batch as usize + 1);
        for m in i..end {
            puts.push((body_key(m), body.clone()));
            puts.push((ready_key(m), vec![0u8; 16]));
        }
        puts.push((b"s\x01npush".to_vec(), end.to_le_bytes().to_vec()));
        e.commit(&puts, &[]);
        i = end;
    }
}

/// Leases up to `k` messages from the head (read index, read bodies, move index to
/// in-flight) and then acknowledges them, two durable batches per round.
fn lease_and_ack(e: &mut dyn Engine, k: usize) -> usize {
    let head = e.scan(READY_BEGIN, READY_END, k);
    if head.is_empty() {
        return 0;
    }
    let ids: Vec<u64> = head
        .iter()
        .map(|(key, _)| u64::from_be_bytes(key[key.len() - 8..].try_into().unwrap()))
        .collect();
    for id in &ids {
        assert_eq!(e.get(&body_key(*id)).map(|b| b.len()), Some(BODY));
    }
    let puts: Vec<_> = ids.iter().map(|id| (flight_key(*id), vec![0u8; 24])).collect();
    let dels: Vec<_> = head.into_iter().map(|(key, _)| key).collect();
    e.commit(&puts, &dels);
    let dels: Vec<_> = ids
        .iter()
        .flat_map(|id| [flight_key(*id), body_key(*id)])
        .collect();
    e.commit(&[], &dels);
    ids.len()
}

fn run(e: &mut dyn Engine, n: u64, batch: u64) {
    let t = Instant::now();
    append(e, 0, n, batch);
    let a = rate(n, t);

    let t = Instant::now();
    let mut popped = 0u64;
    while popped < n {
        popped += lease_and_ack(e, batch as usize) as u64;
    }
    let p = rate(n, t);

    // Steady state: a standing backlog, appends and pops interleaved.
    append(e, n, 10_000, batch);
    let t = Instant::now();
    let mut moved = 0u64;
    let mut next = n + 10_000;
    while moved < n {
        append(e, next, batch, batch);
        next += batch;
        moved += lease_and_ack(e, batch as usize) as u64;
    }
    let s = rate(moved, t);
    println!(
        "{:8} batch {:5}: append {a} | lease+ack {p} | steady append+lease+ack {s}",
        e.name(),
        batch
    );
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let n = args.first().copied().unwrap_or(200_000);
    let batches = if args.len() > 1 { vec![args[1]] } else { vec![128, 1024] };
    for batch in batches {
        let dir = tempfile::tempdir_in(".").unwrap();
        let mut r = Redb(redb::Database::create(dir.path().join("r.redb")).unwrap());
        run(&mut r, n, batch);
        let dir = tempfile::tempdir_in(".").unwrap();
        let db = fjall::Database::builder(dir.path()).open().unwrap();
        let ks = db
            .keyspace("kv", fjall::KeyspaceCreateOptions::default)
            .unwrap();
        let mut f = Fjall { db, ks };
        run(&mut f, n, batch);
    }
}
