//! Reading a usage trace file. Owns the file access and its errors; the format itself is
//! `augur_core::model::usage_trace`.

use std::path::Path;

use crate::error::{Result, StoreError};
use augur_core::model::usage_trace::{UsageTrace, error_at, parse};

/// Reads and parses the trace at `path`.
pub fn load(path: &Path) -> Result<UsageTrace> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::io_at(path, "reading usage trace", e))?;
    Ok(parse(&bytes).map_err(|e| error_at(path, e))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_not_found() {
        let e = load(Path::new("/nonexistent/trace.jsonl")).unwrap_err();
        assert!(matches!(e, StoreError::NotFound { .. }), "{e}");
    }
}
