//! Unit tests of the generator's escaping; the programs themselves are compiled and run by
//! `crates/workloads/tests/c_program.rs`.

use super::{c_str, comment, json_c_str};

#[test]
fn names_become_c_literals_of_json_strings() {
    assert_eq!(json_c_str("buf"), r#""\"buf\"""#);
    assert_eq!(json_c_str("a\"b\\c"), r#""\"a\\\"b\\\\c\"""#);
    assert_eq!(json_c_str("t\n"), r#""\"t\\u000a\"""#);
    assert_eq!(c_str("??="), r#""\?\?=""#);
    assert_eq!(c_str("é"), r#""\303\251""#);
    assert_eq!(comment("a */ b"), "a * / b");
}
