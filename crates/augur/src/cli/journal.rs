//! Log lines that journald files under the right priority: when stderr is the journal's stream
//! (systemd names it in `$JOURNAL_STREAM`), each line starts with its syslog priority (`<3>` for
//! errors ... `<7>` for debug), which journald strips and stores as `PRIORITY=`, so
//! `journalctl -u augur -p warning` shows warnings and errors only.
//!
//! It only decorates the CLI's log format (`cli::init_logging`); it decides no log level and
//! writes nothing itself.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Wraps an event format, prefixing each event with `<priority>` when `enabled`.
#[derive(Debug)]
pub struct SyslogPriorityPrefix<F> {
    inner: F,
    enabled: bool,
}

impl<F> SyslogPriorityPrefix<F> {
    /// Prefixes `inner`'s lines when `enabled` (see [`stderr_is_journal`]).
    pub fn new(inner: F, enabled: bool) -> Self {
        SyslogPriorityPrefix { inner, enabled }
    }
}

/// The syslog priority journald gives a line of this level.
pub fn syslog_priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        _ => 7,
    }
}

impl<S, N, F> FormatEvent<S, N> for SyslogPriorityPrefix<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        if self.enabled {
            write!(writer, "<{}>", syslog_priority(*event.metadata().level()))?;
        }
        self.inner.format_event(ctx, writer, event)
    }
}

/// Whether stderr is the stream systemd connected to the journal (the `fstat` is augur-os's).
pub use augur_os::notify::stderr_is_journal;

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn log_with(enabled: bool) -> String {
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let format = tracing_subscriber::fmt::format().without_time().with_target(false);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .event_format(SyslogPriorityPrefix::new(format, enabled))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!("disk gone");
            tracing::warn!("slow");
            tracing::info!("ready");
            tracing::debug!("detail");
        });
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn under_journald_each_line_carries_its_priority_and_level_without_time_or_colour() {
        let lines: Vec<String> = log_with(true).lines().map(str::to_string).collect();
        assert_eq!(lines, ["<3>ERROR disk gone", "<4> WARN slow", "<6> INFO ready", "<7>DEBUG detail"]);
    }

    #[test]
    fn on_a_terminal_or_file_lines_are_unprefixed() {
        let text = log_with(false);
        assert!(text.starts_with("ERROR disk gone\n"), "{text}");
        assert!(!text.contains('<') && !text.contains('\x1b'), "{text}");
    }
}
