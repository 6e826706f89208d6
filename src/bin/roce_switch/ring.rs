//! The egress queue's bytes: one ring the size of the buffer, frames written in arrival order and
//! read in the same order (the port's FIFO), so that queueing allocates nothing and copies each frame
//! once. A frame that wraps is read as two byte runs.

/// The queued frames' bytes.
pub struct Ring {
    buf: Vec<u8>,
    /// Where the oldest frame starts.
    head: usize,
    /// Bytes held.
    used: usize,
}

impl Ring {
    /// A ring of `capacity` bytes.
    pub fn new(capacity: usize) -> Ring {
        Ring {
            buf: vec![0; capacity.max(1)],
            head: 0,
            used: 0,
        }
    }

    /// Appends a frame made of `parts` (written back to back); false if it does not fit.
    pub fn push(&mut self, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if self.used + len > self.buf.len() {
            return false;
        }
        let cap = self.buf.len();
        let mut at = (self.head + self.used) % cap;
        for part in parts {
            let first = part.len().min(cap - at);
            self.buf[at..at + first].copy_from_slice(&part[..first]);
            self.buf[..part.len() - first].copy_from_slice(&part[first..]);
            at = (at + part.len()) % cap;
        }
        self.used += len;
        true
    }

    /// The bytes of the frame `skip` bytes after the oldest, `len` long, as one or two runs.
    pub fn at(&self, skip: usize, len: usize) -> (&[u8], &[u8]) {
        let cap = self.buf.len();
        let start = (self.head + skip) % cap;
        let first = len.min(cap - start);
        (&self.buf[start..start + first], &self.buf[..len - first])
    }

    /// Applies `f` to bytes `at..at + n` of the frame `skip` bytes after the oldest, in place when
    /// they do not wrap, else through a copy written back.
    pub fn with_bytes_mut(&mut self, skip: usize, at: usize, n: usize, f: impl FnOnce(&mut [u8])) {
        let cap = self.buf.len();
        let start = (self.head + skip + at) % cap;
        if start + n <= cap {
            f(&mut self.buf[start..start + n]);
        } else {
            let mut copy = [0u8; 64];
            let copy = &mut copy[..n];
            for (i, b) in copy.iter_mut().enumerate() {
                *b = self.buf[(start + i) % cap];
            }
            f(copy);
            for (i, b) in copy.iter().enumerate() {
                self.buf[(start + i) % cap] = *b;
            }
        }
    }

    /// Forgets the oldest `len` bytes (a frame that departed).
    pub fn pop(&mut self, len: usize) {
        let len = len.min(self.used);
        self.head = (self.head + len) % self.buf.len();
        self.used -= len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_out_in_order_and_whole_across_the_wrap() {
        let mut r = Ring::new(10);
        assert!(r.push(&[b"abc", b"d"]));
        assert!(r.push(&[b"efgh"]));
        assert!(!r.push(&[b"ijk"]), "8 + 3 > 10");
        assert_eq!(r.at(0, 4), (&b"abcd"[..], &b""[..]));
        r.pop(4);
        assert!(r.push(&[b"ij", b"klmn"]), "wraps");
        assert_eq!(r.at(4, 6), (&b"ij"[..], &b"klmn"[..]));
        r.pop(4);
        let (a, b) = r.at(0, 6);
        assert_eq!([a, b].concat(), b"ijklmn");
        r.pop(6);
        assert_eq!(r.used, 0);
    }

    #[test]
    fn bytes_are_changed_in_place_and_across_the_wrap() {
        let mut r = Ring::new(10);
        assert!(r.push(&[b"abcdefgh"]));
        r.pop(8);
        assert!(r.push(&[b"ijklmn"]), "wraps after 2 bytes");
        r.with_bytes_mut(0, 1, 3, |b| b.make_ascii_uppercase());
        let (a, b) = r.at(0, 6);
        assert_eq!([a, b].concat(), b"iJKLmn");
        r.with_bytes_mut(0, 4, 2, |b| b.copy_from_slice(b"XY"));
        let (a, b) = r.at(0, 6);
        assert_eq!([a, b].concat(), b"iJKLXY");
    }
}
