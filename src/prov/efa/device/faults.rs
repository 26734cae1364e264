//! A seeded fault injector between the transport and the network (as smoltcp's `FaultInjector`
//! wraps a device): drops, duplicates, corrupts and delays datagrams. Used by the simulated
//! device, and by the UDP device when `FABRIC_SRD_FAULTS` is set (tests between hosts:
//! `loss=5,dup=1,corrupt=1,delay_us=300,seed=7`).

use super::super::srd::Time;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// Percent of datagrams dropped.
    pub loss: f64,
    /// Percent duplicated.
    pub dup: f64,
    /// Percent with one bit flipped.
    pub corrupt: f64,
    /// Up to this much extra delay (µs), which reorders.
    pub delay_us: u64,
    pub seed: u64,
}

impl Faults {
    pub fn is_none(&self) -> bool {
        self.loss == 0.0 && self.dup == 0.0 && self.corrupt == 0.0 && self.delay_us == 0
    }

    /// Parses `key=value` pairs separated by commas; unknown keys are an error.
    pub fn parse(spec: &str) -> Option<Faults> {
        let mut f = Faults {
            seed: 1,
            ..Faults::default()
        };
        for kv in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=')?;
            match k {
                "loss" => f.loss = v.parse().ok()?,
                "dup" => f.dup = v.parse().ok()?,
                "corrupt" => f.corrupt = v.parse().ok()?,
                "delay_us" | "reorder_us" => f.delay_us = v.parse().ok()?,
                "seed" => f.seed = v.parse().ok()?,
                _ => return None,
            }
        }
        Some(f)
    }

    /// From `FABRIC_SRD_FAULTS`, if set and valid.
    pub fn from_env() -> Option<Faults> {
        std::env::var("FABRIC_SRD_FAULTS")
            .ok()
            .and_then(|s| Faults::parse(&s))
            .filter(|f| !f.is_none())
    }
}

/// Applies [`Faults`] to outgoing datagrams.
#[derive(Debug)]
pub struct Injector {
    f: Faults,
    rng: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub corrupted: u64,
}

impl Injector {
    pub fn new(f: Faults) -> Injector {
        Injector {
            f,
            rng: f.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            dropped: 0,
            duplicated: 0,
            corrupted: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn chance(&mut self, pct: f64) -> bool {
        pct > 0.0 && (self.next() % 1_000_000) as f64 / 10_000.0 < pct
    }

    /// What happens to one datagram: the copies to deliver, each with its extra delay (ns).
    pub fn apply(&mut self, bytes: &[u8], mut emit: impl FnMut(Vec<u8>, Time)) {
        if self.chance(self.f.loss) {
            self.dropped += 1;
            return;
        }
        let copies = if self.chance(self.f.dup) {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut b = bytes.to_vec();
            if !b.is_empty() && self.chance(self.f.corrupt) {
                self.corrupted += 1;
                let i = (self.next() as usize) % b.len();
                b[i] ^= 1 << (self.next() % 8);
            }
            let delay = if self.f.delay_us > 0 {
                self.next() % (self.f.delay_us * 1000)
            } else {
                0
            };
            emit(b, delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_rates() {
        assert_eq!(Faults::parse("loss=5,dup=1,seed=3").unwrap().loss, 5.0);
        assert!(Faults::parse("lose=5").is_none());
        assert!(Faults::parse("").unwrap().is_none());
        let mut inj = Injector::new(Faults {
            loss: 20.0,
            dup: 10.0,
            corrupt: 10.0,
            delay_us: 100,
            seed: 4,
        });
        let mut out = 0;
        for _ in 0..10_000 {
            inj.apply(&[1, 2, 3], |_, d| {
                assert!(d < 100_000);
                out += 1;
            });
        }
        assert!((1_700..2_300).contains(&inj.dropped), "{}", inj.dropped);
        assert!(inj.duplicated > 500 && inj.corrupted > 500);
        assert_eq!(out, 10_000 - inj.dropped + inj.duplicated);
    }
}
