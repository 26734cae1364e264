//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) and a deterministic batch of
//! random and mutated inputs through the fuzz targets' entry points, so that every `cargo test`
//! runs what the fuzzer found interesting (and any crash it once found) without `cargo fuzz`.

use std::path::Path;

use fabric::fuzzing;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!inputs.is_empty(), "{target}: the seed corpus is empty");
    inputs
}

/// xorshift64*: the same inputs on every run.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// The corpus, then `extra` inputs: corpus entries with bytes flipped, cut or spliced, and
/// purely random ones.
fn replay<R>(target: &str, extra: usize, run: fn(&[u8]) -> R) {
    let inputs = corpus(target);
    for i in &inputs {
        let _ = run(i);
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for k in 0..extra {
        let mut v = inputs[k % inputs.len()].clone();
        match rng(&mut seed) % 4 {
            0 => {
                v = (0..rng(&mut seed) % 2048)
                    .map(|_| rng(&mut seed) as u8)
                    .collect()
            }
            1 => v.truncate((rng(&mut seed) as usize) % (v.len() + 1)),
            2 => {
                let other = &inputs[(rng(&mut seed) as usize) % inputs.len()];
                v.extend_from_slice(other);
            }
            _ => {}
        }
        for _ in 0..1 + rng(&mut seed) % 8 {
            if !v.is_empty() {
                let at = (rng(&mut seed) as usize) % v.len();
                v[at] ^= 1 << (rng(&mut seed) % 8);
            }
        }
        let _ = run(&v);
    }
}

#[test]
fn srd_transport_corpus() {
    replay("srd_transport", 3000, fuzzing::srd_transport);
}

#[test]
fn rdm_packet_corpus() {
    replay("rdm_packet", 3000, fuzzing::rdm_packet);
}

#[test]
fn shm_commands_corpus() {
    // The harness must reach the data path: an inline message of 16 bytes from the connected
    // peer (control byte 5: the peer's token, then drain) completes a posted receive, and the
    // three receives still posted at the end are cancelled (error completions).
    let mut inline = vec![5u8; 1 + 312];
    inline[1..].fill(0);
    inline[1] = 2; // a message
    inline[1 + 24] = 16; // of 16 bytes
    inline[1 + 48..1 + 64].fill(b'x'); // the body follows the 48-byte header
    assert_eq!(fuzzing::shm_commands(&inline), (1, 3));
    replay("shm_commands", 300, fuzzing::shm_commands);
}

#[test]
fn udp_fragments_corpus() {
    replay("udp_fragments", 3000, fuzzing::udp_fragments);
}
