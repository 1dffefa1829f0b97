//! Composite values (performatives, a message's header and properties): lists whose fields
//! are read by position, each of its declared type, absent or null when the standard lets
//! it be, trailing absent ones left out when written.

use crate::types::Value;
use bytes::Bytes;

/// Field `i` of `fields`, `None` when absent or null.
pub(crate) fn present(fields: &[Value], i: usize) -> Option<&Value> {
    fields.get(i).filter(|v| **v != Value::Null)
}

/// `fields` without the trailing nulls (the standard lets them go).
pub(crate) fn trimmed(mut fields: Vec<Value>) -> Vec<Value> {
    while fields.last() == Some(&Value::Null) {
        fields.pop();
    }
    fields
}

/// A field that does not have its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{composite}: field {field} is not {expected}")]
pub struct FieldError {
    /// The performative or message section.
    pub composite: &'static str,
    pub field: &'static str,
    pub expected: &'static str,
}

/// Reads a composite's fields by position.
pub(crate) struct Fields<'a> {
    pub(crate) name: &'static str,
    pub(crate) fields: &'a [Value],
}

macro_rules! getter {
    ($fn:ident, $t:ty, $expected:literal, $($pat:pat => $out:expr),+) => {
        pub(crate) fn $fn(&self, i: usize, field: &'static str) -> Result<Option<$t>, FieldError> {
            match present(self.fields, i) {
                None => Ok(None),
                $(Some($pat) => Ok(Some($out)),)+
                Some(_) => Err(self.wrong(field, $expected)),
            }
        }
    };
}

impl Fields<'_> {
    fn wrong(&self, field: &'static str, expected: &'static str) -> FieldError {
        FieldError {
            composite: self.name,
            field,
            expected,
        }
    }

    getter!(string, String, "a string", Value::String(s) => s.clone());
    getter!(symbol, String, "a symbol", Value::Symbol(s) => s.clone());
    getter!(uint, u32, "a uint", Value::Uint(n) => *n);
    getter!(ushort, u16, "a ushort", Value::Ushort(n) => *n);
    getter!(ulong, u64, "a ulong", Value::Ulong(n) => *n);
    getter!(ubyte, u8, "a ubyte", Value::Ubyte(n) => *n);
    getter!(boolean, bool, "a boolean", Value::Bool(b) => *b);
    getter!(binary, Bytes, "binary", Value::Binary(b) => b.clone());
    getter!(timestamp, i64, "a timestamp", Value::Timestamp(t) => *t);
    getter!(
        id,
        Value,
        "a ulong, uuid, binary or string",
        v @ (Value::Ulong(_) | Value::Uuid(_) | Value::Binary(_) | Value::String(_)) => v.clone()
    );

    /// Any value, `None` when absent or null.
    pub(crate) fn any(&self, i: usize) -> Option<Value> {
        present(self.fields, i).cloned()
    }

    /// A symbol or an array of symbols (the standard's "multiple" symbols).
    pub(crate) fn symbols(&self, i: usize, field: &'static str) -> Result<Vec<String>, FieldError> {
        match present(self.fields, i) {
            None => Ok(Vec::new()),
            Some(Value::Symbol(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) => a
                .elements
                .iter()
                .map(|e| match e {
                    Value::Symbol(s) => Ok(s.clone()),
                    _ => Err(self.wrong(field, "symbols")),
                })
                .collect(),
            Some(_) => Err(self.wrong(field, "symbols")),
        }
    }

    /// A required field.
    pub(crate) fn required<T>(
        &self,
        got: Result<Option<T>, FieldError>,
        field: &'static str,
        expected: &'static str,
    ) -> Result<T, FieldError> {
        got?.ok_or_else(|| self.wrong(field, expected))
    }
}
