//! One string form for every validated text type.
//!
//! Names, ids, ref prefixes and hosts are all strings with a rule. Each such type has a `parse`
//! that checks the rule and a `Display` that writes it back; [`string_form!`](macro@crate::string_form)
//! derives the rest from those two: `FromStr`, `TryFrom<String>` — which
//! `#[serde(try_from = "String", into = "String")]` uses, so every value read back from storage
//! or the wire is checked again — and `From<T> for String`.

/// Derives `FromStr`, `TryFrom<String>` and `From<T> for String` from the type's `parse` and
/// `Display`; with `display` as a third argument, also `Display` from the type's `as_str`.
///
/// ```
/// use l3m_core::string_form;
///
/// #[derive(Debug)]
/// pub struct Tag(String);
///
/// impl Tag {
///     pub fn parse(s: &str) -> Result<Self, String> {
///         if s.is_empty() { Err("empty".into()) } else { Ok(Self(s.to_owned())) }
///     }
///     pub fn as_str(&self) -> &str {
///         &self.0
///     }
/// }
///
/// string_form!(Tag, String, display);
///
/// let tag: Tag = "x".parse().unwrap();
/// assert_eq!(String::from(tag), "x");
/// assert!(Tag::try_from(String::new()).is_err());
/// ```
#[macro_export]
macro_rules! string_form {
    ($ty:ty, $err:ty) => {
        impl ::std::str::FromStr for $ty {
            type Err = $err;
            fn from_str(s: &str) -> ::std::result::Result<Self, $err> {
                <$ty>::parse(s)
            }
        }

        impl ::std::convert::TryFrom<::std::string::String> for $ty {
            type Error = $err;
            fn try_from(s: ::std::string::String) -> ::std::result::Result<Self, $err> {
                <$ty>::parse(&s)
            }
        }

        impl ::std::convert::From<$ty> for ::std::string::String {
            fn from(v: $ty) -> ::std::string::String {
                ::std::string::ToString::to_string(&v)
            }
        }
    };
    ($ty:ty, $err:ty, display) => {
        $crate::string_form!($ty, $err);

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
