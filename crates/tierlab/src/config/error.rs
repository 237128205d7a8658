//! Config errors: each says which file (or `--set`), which line where known, and which key.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A file that cannot be read.
    Io { file: String, msg: String },
    /// A TOML syntax error; `line` is 1-based.
    Syntax {
        file: String,
        line: Option<usize>,
        msg: String,
    },
    /// A key whose value is wrong (type, range, or consistency with other keys).
    Key {
        file: String,
        key: String,
        msg: String,
    },
    /// A key its table does not have; `expected` lists the keys it does.
    UnknownKey {
        file: String,
        key: String,
        expected: Vec<String>,
    },
    /// A `--set KEY=VALUE` that is malformed, or whose value the config rejects. `file` is the
    /// scenario it was applied to; `key` the key the error is about, when there is one.
    Set {
        file: String,
        assignment: String,
        key: Option<String>,
        msg: String,
    },
    /// Anything else (a whole file, a command-line argument).
    Other(String),
}

impl ConfigError {
    /// An error about one key of one file: `FILE: key `KEY`: MSG`.
    pub fn key(file: &str, key: impl fmt::Display, msg: impl fmt::Display) -> Self {
        ConfigError::Key {
            file: file.to_string(),
            key: key.to_string(),
            msg: msg.to_string(),
        }
    }

    /// An error with no key to name (a whole file, a command-line argument).
    pub fn msg(msg: impl Into<String>) -> Self {
        ConfigError::Other(msg.into())
    }

    /// The key the error is about, if any.
    pub fn key_name(&self) -> Option<&str> {
        match self {
            ConfigError::Key { key, .. } | ConfigError::UnknownKey { key, .. } => Some(key),
            ConfigError::Set { key, .. } => key.as_deref(),
            _ => None,
        }
    }

    /// A `--set` error, now that the file it was applied to is known.
    pub(crate) fn in_file(mut self, origin: &str) -> Self {
        if let ConfigError::Set { file, .. } = &mut self {
            *file = origin.to_string();
        }
        self
    }

    /// A key error about a value the machine preset `file` gave.
    pub(crate) fn in_preset(mut self, preset: &str) -> Self {
        if let ConfigError::Key { file, .. } | ConfigError::UnknownKey { file, .. } = &mut self {
            *file = preset.to_string();
        }
        self
    }

    /// Attribute a key error to the `--set` that gave the key its value.
    pub(crate) fn blamed_on_set(self, assignment: &str) -> Self {
        let file = match &self {
            ConfigError::Key { file, .. } | ConfigError::UnknownKey { file, .. } => file.clone(),
            _ => return self,
        };
        let key = self.key_name().map(str::to_string);
        let msg = match self {
            ConfigError::Key { msg, .. } => msg,
            ConfigError::UnknownKey { expected, .. } => {
                format!("unknown key, expected {}", one_of(&expected))
            }
            _ => unreachable!("only key errors reach here"),
        };
        ConfigError::Set {
            file,
            assignment: assignment.to_string(),
            key,
            msg,
        }
    }
}

/// "`a`", "`a` or `b`", "one of `a`, `b`, `c`" (serde's wording).
fn one_of(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.as_slice() {
        [] => "no keys".to_string(),
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        all => format!("one of {}", all.join(", ")),
    }
}

/// `FILE: ` unless the file is unknown (an error built before it was).
fn file_prefix(f: &mut fmt::Formatter<'_>, file: &str) -> fmt::Result {
    if file.is_empty() {
        Ok(())
    } else {
        write!(f, "{file}: ")
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Io { file, msg } => write!(f, "{file}: cannot read: {msg}"),
            ConfigError::Syntax { file, line, msg } => {
                file_prefix(f, file)?;
                match line {
                    Some(l) => write!(f, "line {l}: {msg}"),
                    None => f.write_str(msg),
                }
            }
            ConfigError::Key { file, key, msg } => {
                file_prefix(f, file)?;
                if key.is_empty() {
                    f.write_str(msg)
                } else {
                    write!(f, "key `{key}`: {msg}")
                }
            }
            ConfigError::UnknownKey {
                file,
                key,
                expected,
            } => {
                file_prefix(f, file)?;
                write!(f, "key `{key}`: unknown key, expected {}", one_of(expected))
            }
            ConfigError::Set {
                file,
                assignment,
                key,
                msg,
            } => {
                file_prefix(f, file)?;
                let assignment = clip(assignment);
                match key {
                    Some(k) => write!(f, "key `{}` (from --set {assignment}): {msg}", clip(k)),
                    None => write!(f, "--set {assignment}: {msg}"),
                }
            }
            ConfigError::Other(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A user's text cut to 120 characters, so a 60 KB `--set` does not fill the terminal.
fn clip(s: &str) -> String {
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}… ({} bytes)", &s[..i], s.len()),
        None => s.to_string(),
    }
}

/// A multi-line message (toml's "invalid string\nexpected ...") as one line.
pub(crate) fn one_line(msg: &str) -> String {
    let lines: Vec<&str> = msg
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// The line (1-based) of byte `offset` in `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Split serde's "unknown field `x`, expected one of `a`, `b`" into `x` and `[a, b]`.
pub(crate) fn parse_unknown_field(msg: &str) -> Option<(String, Vec<String>)> {
    let rest = msg.strip_prefix("unknown field `")?;
    let (name, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((name.to_string(), expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_prints_one_line_naming_file_and_key() {
        let cases = [
            (
                ConfigError::key("s.toml", "vm.swappiness", "201 is out of range (0..=200)"),
                "s.toml: key `vm.swappiness`: 201 is out of range (0..=200)",
            ),
            (
                ConfigError::UnknownKey {
                    file: "s.toml".into(),
                    key: "vm.swapiness".into(),
                    expected: vec!["swappiness".into(), "min_free_kbytes".into()],
                },
                "s.toml: key `vm.swapiness`: unknown key, expected `swappiness` or `min_free_kbytes`",
            ),
            (
                ConfigError::Syntax {
                    file: "s.toml".into(),
                    line: Some(2),
                    msg: "expected a value".into(),
                },
                "s.toml: line 2: expected a value",
            ),
            (
                ConfigError::key("s.toml", "vm.swappiness", "too big").blamed_on_set("vm.swappiness=900"),
                "s.toml: key `vm.swappiness` (from --set vm.swappiness=900): too big",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }

    #[test]
    fn serde_unknown_field_messages_split_into_name_and_expected() {
        let (name, expected) =
            parse_unknown_field("unknown field `swapiness`, expected one of `a`, `b`, `c`")
                .unwrap();
        assert_eq!(name, "swapiness");
        assert_eq!(expected, ["a", "b", "c"]);
        assert!(parse_unknown_field("invalid type: string").is_none());
    }
}
