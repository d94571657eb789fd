//! How an application's learned model is kept in its row of the state: compact binary
//! (postcard, behind a format byte) in a BLOB, and the JSON text states before schema 9 held.
//!
//! A model is decoded at every learned launch, and at every exec and planning round whose replay
//! profile the state's cache does not hold; as JSON, a model of 480 ranges was 44 KiB and took
//! about 200 µs to decode (most of a planning round's CPU when it met one, issue 19). The binary
//! form is about a fifth of the size and a quarter of the time. Owns the encoding only: no SQL,
//! and nothing about what a model holds or how it is learned.

use augur_core::model::learn::AppModel;

/// The first byte of a model in the binary form: its version, so that a later form can be told
/// from this one (and a BLOB that is not a model refused).
pub const BINARY_FORM_1: u8 = 1;

/// A model as its row holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredModel<'a> {
    /// A BLOB: a format byte, then the model.
    Binary(&'a [u8]),
    /// Text: the JSON an older augur wrote.
    Json(&'a [u8]),
}

/// Why a stored model does not decode.
#[derive(Debug, thiserror::Error)]
pub enum ModelDecodeError {
    /// A BLOB in a form this augur does not know (empty, or another format byte).
    #[error("binary model in unknown form {0:?}")]
    UnknownForm(Option<u8>),
    /// The binary form does not decode.
    #[error("binary model: {0}")]
    Binary(#[from] postcard::Error),
    /// The JSON does not decode.
    #[error("JSON model: {0}")]
    Json(#[from] serde_json::Error),
    /// It decodes to a model learning could not have made (`AppModel::check_consistent`).
    #[error("inconsistent model: {0}")]
    Inconsistent(&'static str),
}

/// `model` in the binary form, for a BLOB.
pub fn encode(model: &AppModel) -> Result<Vec<u8>, postcard::Error> {
    let mut out = vec![BINARY_FORM_1];
    out.extend_from_slice(&postcard::to_stdvec(model)?);
    Ok(out)
}

/// The model `stored` holds, in either form, if it is one learning could have made.
pub fn decode(stored: StoredModel<'_>) -> Result<AppModel, ModelDecodeError> {
    let model: AppModel = match stored {
        StoredModel::Binary([BINARY_FORM_1, rest @ ..]) => postcard::from_bytes(rest)?,
        StoredModel::Binary(other) => return Err(ModelDecodeError::UnknownForm(other.first().copied())),
        StoredModel::Json(text) => serde_json::from_slice(text)?,
    };
    model.check_consistent().map_err(ModelDecodeError::Inconsistent)?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use augur_core::model::learn::{FileModel, Segment};
    use augur_core::model::profile::{FileIdentity, Lookup, LookupKind, TraceMode};
    use augur_core::model::range::PageRange;
    use proptest::prelude::*;

    use super::*;

    fn model(files: u64, segments: u64, lookups: usize) -> AppModel {
        let mut m = AppModel::new(4096);
        m.launches = 7;
        m.weight = 3.123_456_789_012_345;
        m.mode = TraceMode::Insertion;
        m.command = vec!["/usr/bin/app".into(), "--flag".into()];
        for f in 0..files {
            let segments = (0..segments)
                .map(|k| Segment {
                    range: PageRange::new(k * 37, 5),
                    score: 1.0 / (k as f64 + 1.3),
                    last_launch: 7,
                    first_use_us: f * 1000 + k * 17,
                })
                .collect();
            let identity = FileIdentity { dev: 65024, ino: 1234 + f, size: 8 << 20, mtime_ns: -5 };
            m.files.insert(PathBuf::from(format!("/usr/lib/libpart{f}.so.1")), FileModel { identity, first_use_us: f, segments });
        }
        m.lookups = (0..lookups).map(|n| Lookup { path: PathBuf::from(format!("/etc/x{n}")), kind: LookupKind::Stat }).collect();
        m
    }

    #[test]
    fn a_model_comes_back_whole_from_the_binary_form_and_is_smaller_than_its_json() {
        for m in [AppModel::new(4096), model(40, 12, 0), model(3, 2, 5)] {
            let bytes = encode(&m).unwrap();
            assert_eq!(bytes[0], BINARY_FORM_1);
            assert_eq!(decode(StoredModel::Binary(&bytes)).unwrap(), m);
            let json = serde_json::to_vec(&m).unwrap();
            assert_eq!(decode(StoredModel::Json(&json)).unwrap(), m);
            assert!(bytes.len() * 3 < json.len(), "{} bytes against {} of JSON", bytes.len(), json.len());
        }
    }

    #[test]
    fn json_an_older_augur_wrote_without_lookups_still_decodes() {
        let mut json = serde_json::to_value(model(2, 3, 0)).unwrap();
        json.as_object_mut().unwrap().remove("lookups");
        let text = serde_json::to_vec(&json).unwrap();
        assert_eq!(decode(StoredModel::Json(&text)).unwrap(), model(2, 3, 0));
    }

    #[test]
    fn blobs_in_no_known_form_are_refused_and_truncated_ones_fail() {
        assert!(matches!(decode(StoredModel::Binary(&[])), Err(ModelDecodeError::UnknownForm(None))));
        assert!(matches!(decode(StoredModel::Binary(b"{\"launches\":1}")), Err(ModelDecodeError::UnknownForm(Some(b'{')))));
        let bytes = encode(&model(4, 4, 2)).unwrap();
        for cut in [1, 2, bytes.len() / 2, bytes.len() - 1] {
            assert!(matches!(decode(StoredModel::Binary(&bytes[..cut])), Err(ModelDecodeError::Binary(_))), "cut at {cut}");
        }
        assert!(matches!(decode(StoredModel::Json(b"{")), Err(ModelDecodeError::Json(_))));
    }

    #[test]
    fn a_model_learning_could_not_have_made_is_refused() {
        type Spoil = fn(&mut AppModel);
        let spoilers: [(Spoil, &str); 8] = [
            (|m| m.page_size = 3 << 10, "page size"),
            (|m| m.page_size = 2 << 30, "page size"),
            (|m| m.weight = f64::NAN, "weight"),
            (|m| m.launches = u64::MAX, "launch count"),
            (|m| m.files.values_mut().next().unwrap().segments[1].range.start = 0, "out of order"),
            (|m| m.files.values_mut().next().unwrap().segments[0].range.len = u64::MAX, "beyond"),
            (|m| m.files.values_mut().next().unwrap().segments[0].score = f64::INFINITY, "score"),
            (|m| m.files.values_mut().next().unwrap().segments[0].last_launch = 8, "not counted"),
        ];
        for (spoil, what) in spoilers {
            let mut m = model(2, 3, 1);
            spoil(&mut m);
            let bytes = encode(&m).unwrap();
            let err = decode(StoredModel::Binary(&bytes)).unwrap_err();
            assert!(matches!(&err, ModelDecodeError::Inconsistent(why) if why.contains(what)), "{what}: {err}");
        }
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(StoredModel::Binary(&bytes));
            let mut versioned = vec![BINARY_FORM_1];
            versioned.extend_from_slice(&bytes);
            let _ = decode(StoredModel::Binary(&versioned));
        }

        #[test]
        fn any_model_comes_back_whole(files in 0u64..6, segments in 0u64..6, lookups in 0usize..4, weight in 0.0f64..1e6) {
            let mut m = model(files, segments, lookups);
            m.weight = weight;
            prop_assert_eq!(decode(StoredModel::Binary(&encode(&m).unwrap())).unwrap(), m);
        }
    }
}
