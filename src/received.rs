//! A body read into memory, kept as the connection handed it over.
//!
//! Most answers arrive in one chunk: every JSON answer, and on a fast link
//! a whole image. Such a body is kept as that chunk, shared with the
//! connection's read buffer, so it is neither allocated again nor copied
//! (as reqwest's own `bytes()` keeps it too). That suits an answer that is
//! decoded and dropped. A download handed to a caller, who may keep it
//! long, gets bytes of its own instead ([`Received::into_owned_bytes`]):
//! shared, a small image would keep alive a read buffer of some hundred
//! KiB, past what `max_download_bytes` promises. A body in several chunks
//! is joined as they come, into one allocation of the announced length.

use bytes::Bytes;

/// A body read into memory (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Received {
    held: Held,
    /// The length announced, within what may be reserved on the service's
    /// word: the room the joined body gets when a second chunk comes.
    expected: usize,
}

#[derive(Debug, Default)]
enum Held {
    #[default]
    Nothing,
    /// The only chunk so far, as it came.
    One(Bytes),
    /// Several chunks, joined.
    Joined(Vec<u8>),
}

impl Received {
    /// Room for `length` bytes once a body comes in several chunks.
    pub(crate) fn expect(&mut self, length: usize) {
        self.expected = length;
    }

    /// Adds the next chunk.
    pub(crate) fn push(&mut self, chunk: Bytes) {
        self.held = match std::mem::take(&mut self.held) {
            Held::Nothing => Held::One(chunk),
            Held::One(first) => {
                let mut joined = Vec::with_capacity(self.expected.max(first.len() + chunk.len()));
                joined.extend_from_slice(&first);
                joined.extend_from_slice(&chunk);
                Held::Joined(joined)
            }
            Held::Joined(mut joined) => {
                joined.extend_from_slice(&chunk);
                Held::Joined(joined)
            }
        };
    }

    /// Forgets what was read (an attempt is read again from the start).
    pub(crate) fn clear(&mut self) {
        self.held = Held::Nothing;
    }

    /// Replaces the body (with its scrubbed copy).
    pub(crate) fn replace(&mut self, body: Vec<u8>) {
        self.held = Held::Joined(body);
    }

    /// The body read so far.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match &self.held {
            Held::Nothing => &[],
            Held::One(chunk) => chunk,
            Held::Joined(joined) => joined,
        }
    }

    /// The body, in bytes of its own: a body kept as the one chunk it came
    /// in is copied out of the buffer it shares (see the module
    /// documentation).
    pub(crate) fn into_owned_bytes(self) -> Bytes {
        match self.held {
            Held::One(chunk) => Bytes::copy_from_slice(&chunk),
            _ => self.into_bytes(),
        }
    }

    /// The body, without a copy.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self.held {
            Held::Nothing => Bytes::new(),
            Held::One(chunk) => chunk,
            Held::Joined(joined) => Bytes::from(joined),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_chunk_is_kept_as_it_came_and_several_are_joined_in_order() {
        let chunk = Bytes::from_static(b"{\"status\":\"Ready\"}");
        let mut one = Received::default();
        one.push(chunk.clone());
        assert_eq!(one.as_slice(), &chunk[..]);
        let kept = one.into_bytes();
        assert_eq!(kept.as_ptr(), chunk.as_ptr(), "the chunk itself, not a copy");
        let mut download = Received::default();
        download.push(chunk.clone());
        let own = download.into_owned_bytes();
        assert_eq!(own, chunk);
        assert_ne!(own.as_ptr(), chunk.as_ptr(), "a download holds bytes of its own");

        let mut several = Received::default();
        several.expect(9);
        for part in ["abc", "def", "ghi"] {
            several.push(Bytes::from(part));
        }
        assert_eq!(several.as_slice(), b"abcdefghi");
        several.clear();
        assert_eq!(several.as_slice(), b"");
        several.push(Bytes::from_static(b"again"));
        several.replace(b"scrubbed".to_vec());
        assert_eq!(several.into_bytes(), Bytes::from_static(b"scrubbed"));
        assert_eq!(Received::default().into_bytes(), Bytes::new());
    }
}
