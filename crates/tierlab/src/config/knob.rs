//! What a knob is: its TOML key, the kernel file it mirrors, its default, the range the kernel
//! (or the hardware, or tierlab) accepts, where that range comes from, and a one-line doc.
//! `knob_table!` declares a config table from one such entry per knob: the struct, its
//! `Default`, its serde attributes, its range checks and its metadata come from the same lines.

use serde::Deserialize;

/// The `path` of a setting that exists only in the simulator.
pub const TIERLAB: &str = "tierlab only";
/// The kernel's INT_MAX, the top of every `proc_dointvec_minmax` sysctl.
pub const INT_MAX: u64 = i32::MAX as u64;
/// The top of a `debugfs_create_u32` file.
pub const UINT_MAX: u64 = u32::MAX as u64;

/// Values a knob accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Range {
    /// Anything its type can hold (booleans, names, enums whose variants serde checks).
    Any,
    /// Integers `min..=max`.
    Int(u64, u64),
    /// 0, or integers `min..=max` (0 usually means "automatic").
    ZeroOr(u64, u64),
    /// Reals from `min` to `max`; an open end excludes its bound.
    Real {
        min: f64,
        min_open: bool,
        max: f64,
        max_open: bool,
    },
    /// One of these strings (serde checks them while parsing).
    OneOf(&'static [&'static str]),
    /// Checked against other keys in `validate.rs`; the text states the rule.
    Rule(&'static str),
    /// A sub-table or array of tables; its own keys are knobs.
    Table,
}

impl Range {
    /// Finite reals above `min`.
    pub const fn above(min: f64) -> Range {
        Range::Real {
            min,
            min_open: true,
            max: f64::INFINITY,
            max_open: true,
        }
    }

    /// Finite reals from `min` up.
    pub const fn at_least(min: f64) -> Range {
        Range::Real {
            min,
            min_open: false,
            max: f64::INFINITY,
            max_open: true,
        }
    }

    /// Finite reals from `min` to `max`, both included.
    pub const fn between(min: f64, max: f64) -> Range {
        Range::Real {
            min,
            min_open: false,
            max,
            max_open: false,
        }
    }

    /// Is `v` inside an integer range? Other ranges accept every integer.
    pub fn admits_int(&self, v: u64) -> bool {
        match *self {
            Range::Int(lo, hi) => (lo..=hi).contains(&v),
            Range::ZeroOr(lo, hi) => v == 0 || (lo..=hi).contains(&v),
            _ => true,
        }
    }

    /// Is `v` inside a real range? NaN never is.
    pub fn admits_real(&self, v: f64) -> bool {
        match *self {
            Range::Real {
                min,
                min_open,
                max,
                max_open,
            } => {
                let above = if min_open { v > min } else { v >= min };
                let below = if max_open { v < max } else { v <= max };
                above && below
            }
            _ => true,
        }
    }
}

/// `INT_MAX` / `UINT_MAX` by name, so ranges read like the kernel's.
fn bound(v: u64) -> String {
    match v {
        INT_MAX => "INT_MAX".into(),
        UINT_MAX => "UINT_MAX".into(),
        v => v.to_string(),
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Range::Any | Range::Table => f.write_str("any"),
            Range::Int(lo, u64::MAX) => write!(f, "≥ {lo}"),
            Range::Int(lo, hi) => write!(f, "{lo}..={}", bound(hi)),
            Range::ZeroOr(lo, hi) => write!(f, "0 or {lo}..={}", bound(hi)),
            Range::Real {
                min,
                min_open,
                max,
                max_open,
            } => {
                let open = if min_open { '(' } else { '[' };
                let close = if max_open { ')' } else { ']' };
                let max = if max.is_infinite() {
                    "∞".to_string()
                } else {
                    max.to_string()
                };
                write!(f, "{open}{min}, {max}{close}")
            }
            Range::OneOf(names) => {
                let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
                f.write_str(&quoted.join(", "))
            }
            Range::Rule(text) => f.write_str(text),
        }
    }
}

/// One declared knob, as `tierlab knobs` lists it.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// Key inside its table, as written in TOML (serde renames applied).
    pub key: &'static str,
    /// The sysctl, debugfs or sysfs file it mirrors, or [`TIERLAB`].
    pub path: &'static str,
    /// Rust type of the field.
    pub ty: &'static str,
    pub range: Range,
    /// Where the range comes from: kernel file and function or sysctl table, or tierlab's reason.
    pub source: &'static str,
    /// Doc comment lines; the first is the one-line summary.
    pub doc: &'static [&'static str],
    /// A scenario must set it (there is no default).
    pub required: bool,
    /// The default, written as TOML.
    pub default: fn() -> String,
}

impl Knob {
    /// The doc's first sentence (its lines joined), for tables.
    pub fn summary(&self) -> String {
        let text = self
            .doc
            .iter()
            .map(|d| d.trim())
            .collect::<Vec<_>>()
            .join(" ");
        // A sentence ends at ". " before a capital ("e.g. " does not end one).
        let end = text.match_indices(". ").map(|(i, _)| i).find(|&i| {
            text[i + 2..]
                .chars()
                .next()
                .is_some_and(|c| c.is_uppercase())
        });
        match end {
            Some(end) => text[..=end].to_string(),
            None => text,
        }
    }

    /// The range as `tierlab knobs` prints it; a boolean's "any" is spelled out.
    pub fn range_text(&self) -> String {
        match (self.range, self.ty) {
            (Range::Any, "bool") => "true, false".into(),
            (range, _) => range.to_string(),
        }
    }

    /// The default as TOML, or "required".
    pub fn default_text(&self) -> String {
        if self.required {
            "required".into()
        } else {
            (self.default)()
        }
    }
}

/// A value a knob can hold: how to check it against its range and how to print it.
pub trait KnobValue {
    /// `Err(why)` when the value is outside `range`.
    fn check(&self, _range: &Range) -> Result<(), String> {
        Ok(())
    }
    /// The value as TOML.
    fn to_toml(&self) -> String;
}

macro_rules! int_knob_value {
    ($($t:ty),*) => {$(
        impl KnobValue for $t {
            fn check(&self, range: &Range) -> Result<(), String> {
                if range.admits_int(*self as u64) {
                    Ok(())
                } else {
                    Err(format!("{self} is out of range ({range})"))
                }
            }
            fn to_toml(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
int_knob_value!(u32, u64);

/// A real as errors print it: 1e300 as `1e300`, not 301 digits.
pub fn real_text(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

impl KnobValue for f64 {
    fn check(&self, range: &Range) -> Result<(), String> {
        if range.admits_real(*self) {
            Ok(())
        } else {
            Err(format!("{} is out of range ({range})", real_text(*self)))
        }
    }
    fn to_toml(&self) -> String {
        format!("{self:?}")
    }
}

impl KnobValue for bool {
    fn to_toml(&self) -> String {
        self.to_string()
    }
}

impl KnobValue for String {
    fn check(&self, range: &Range) -> Result<(), String> {
        match range {
            Range::OneOf(names) if !names.contains(&self.as_str()) => {
                Err(format!("\"{self}\" is not one of {range}"))
            }
            _ => Ok(()),
        }
    }
    fn to_toml(&self) -> String {
        format!("{self:?}")
    }
}

impl<T: KnobValue> KnobValue for Option<T> {
    fn check(&self, range: &Range) -> Result<(), String> {
        self.as_ref().map_or(Ok(()), |v| v.check(range))
    }
    fn to_toml(&self) -> String {
        self.as_ref().map_or("unset".into(), KnobValue::to_toml)
    }
}

impl<T: KnobValue> KnobValue for Vec<T> {
    fn to_toml(&self) -> String {
        let items: Vec<String> = self.iter().map(KnobValue::to_toml).collect();
        format!("[{}]", items.join(", "))
    }
}

/// An enum knob prints as the string serde reads.
macro_rules! enum_knob_value {
    ($($t:ty),*) => {$(
        impl $crate::config::knob::KnobValue for $t {
            fn to_toml(&self) -> String {
                match ::toml::Value::try_from(self) {
                    Ok(::toml::Value::String(s)) => format!("{s:?}"),
                    _ => format!("{self:?}"),
                }
            }
        }
    )*};
}
pub(crate) use enum_knob_value;

/// A feature switch: a boolean, or the strings "on" / "off".
pub fn on_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Sw {
        B(bool),
        S(String),
    }
    match Sw::deserialize(d)? {
        Sw::B(b) => Ok(b),
        Sw::S(s) => match s.as_str() {
            "on" | "true" | "1" => Ok(true),
            "off" | "false" | "0" => Ok(false),
            _ => Err(serde::de::Error::custom(format!(
                "'{s}': expected on/off or true/false"
            ))),
        },
    }
}

/// The TOML key of a field: its serde `rename`, else its name.
macro_rules! knob_key {
    ($field:ident;) => { stringify!($field) };
    ($field:ident; rename = $key:literal $($rest:tt)*) => { $key };
    ($field:ident; $skip:tt $($rest:tt)*) => { $crate::config::knob::knob_key!($field; $($rest)*) };
}
pub(crate) use knob_key;

/// The declared default, or the type's zero for a required knob (never used: the loader
/// reports the key missing first).
macro_rules! knob_default {
    () => {
        Default::default()
    };
    ($default:expr) => {
        $default
    };
}

pub(crate) use knob_default;

/// Whether a knob has no default.
macro_rules! knob_required {
    () => {
        true
    };
    ($default:expr) => {
        false
    };
}
pub(crate) use knob_required;

/// Declare a config table, one entry per knob:
///
/// ```text
/// /// One-line doc (more lines allowed).
/// #[serde(...)]                                  // optional, passed through
/// field: Type = default,                         // no `= default`: the scenario must set it
///     path: "/proc/sys/...", range: Range::Int(1, 3000), source: "mm/page_alloc.c ...";
/// ```
///
/// It generates the struct (serde `deny_unknown_fields, default`), `Default`, `KNOBS` (the
/// metadata, in declaration order) and `check_ranges`.
macro_rules! knob_table {
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde($($serde:tt)*)])*
                $field:ident : $ty:ty $(= $default:expr)?,
                    path: $path:expr, range: $range:expr, source: $source:expr;
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Clone, Debug, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])*
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $crate::config::knob::knob_default!($($default)?),)* }
            }
        }

        impl $crate::config::knob::KnobValue for $name {
            fn to_toml(&self) -> String {
                String::new()
            }
        }

        impl $name {
            /// This table's knobs, in declaration order.
            pub const KNOBS: &'static [$crate::config::knob::Knob] = &[$(
                $crate::config::knob::Knob {
                    key: $crate::config::knob::knob_key!($field; $($($serde)*)*),
                    path: $path,
                    ty: stringify!($ty),
                    range: $range,
                    source: $source,
                    doc: &[$($doc),*],
                    required: $crate::config::knob::knob_required!($($default)?),
                    default: || {
                        $crate::config::knob::KnobValue::to_toml(
                            &<$name as Default>::default().$field,
                        )
                    },
                },
            )*];

            /// Check every knob against its declared range: `Err((key, why))`.
            pub fn check_ranges(&self) -> Result<(), (&'static str, String)> {
                $(
                    $crate::config::knob::KnobValue::check(&self.$field, &$range)
                        .map_err(|why| ($crate::config::knob::knob_key!($field; $($($serde)*)*), why))?;
                )*
                Ok(())
            }
        }
    };
}
pub(crate) use knob_table;
