//! Reading the configuration file. Owns the file access and what a missing file means; the keys,
//! defaults and validation are `augur_engine::config`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use augur_engine::config::{Config, ConfigError, DEFAULT_CONFIG_PATH};

/// Reads the configuration: `path` when given (it must exist), else the default path, where a
/// missing file means all defaults.
pub fn load(path: Option<&Path>) -> Result<Config> {
    let (path, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from(DEFAULT_CONFIG_PATH), false),
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Config::parse(&text, &path)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(Config::default()),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(ConfigError { path, line: None, detail: "not UTF-8 text".into() }.into())
        }
        Err(e) => Err(Error::io_at(&path, "reading configuration", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        assert!(matches!(load(Some(&missing)), Err(Error::NotFound { .. })));
    }
}
