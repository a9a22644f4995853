//! Tokens cannot be forged or widened outside the ring: each attempt must fail to compile.
//!
//! The expected diagnostics are checked in beside each case (`compile_fail/*.stderr`); after a
//! toolchain upgrade changes their wording, regenerate them with `TRYBUILD=overwrite` and review
//! that each still names the private field, private function or missing trait.

#[test]
fn tokens_cannot_be_forged_or_widened_outside_the_ring() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
