//! AMQP 1.0's type system (part 1 of the OASIS standard): every primitive type in every
//! encoding the standard allows, described types, lists, maps and arrays. [`Value::decode`]
//! reads any valid encoding; [`Value::encode`] writes the smallest one (`smallulong`,
//! `list0`, `str8`, …), as Qpid Proton and RabbitMQ do.
//!
//! Decoding never panics and never allocates more than the input could hold: every size and
//! count is checked against the bytes left before anything is read, and nesting is bounded
//! ([`MAX_DEPTH`]).

use bytes::{BufMut, Bytes, BytesMut};

/// The deepest nesting of lists, maps, arrays and described values decoded.
pub const MAX_DEPTH: usize = 32;

/// Why bytes are not an AMQP 1.0 value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ends inside a value.
    #[error("the input ends inside a value")]
    Truncated,
    /// A format code the standard does not define.
    #[error("unknown format code {0:#04x}")]
    UnknownCode(u8),
    /// A string or symbol that is not UTF-8 (symbols: ASCII), or a char that is not one.
    #[error("invalid text")]
    Text,
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("nested deeper than {MAX_DEPTH}")]
    TooDeep,
    /// A map with an odd number of elements, or a compound whose size does not hold its
    /// elements.
    #[error("malformed compound value")]
    Malformed,
}

/// An AMQP 1.0 value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Ubyte(u8),
    Ushort(u16),
    Uint(u32),
    Ulong(u64),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    /// IEEE 754 decimal32, kept as its bytes.
    Decimal32([u8; 4]),
    /// IEEE 754 decimal64, kept as its bytes.
    Decimal64([u8; 8]),
    /// IEEE 754 decimal128, kept as its bytes.
    Decimal128([u8; 16]),
    Char(char),
    /// Milliseconds since the Unix epoch.
    Timestamp(i64),
    Uuid([u8; 16]),
    Binary(Bytes),
    String(String),
    Symbol(String),
    List(Vec<Value>),
    Map(Vec<(Value, Value)>),
    /// Elements of one type; empty arrays keep their element constructor's code.
    Array(Array),
    /// A descriptor and the value it describes.
    Described(Box<Value>, Box<Value>),
}

/// An array: its elements, all encoded with one constructor.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// The descriptor of a described element type.
    pub descriptor: Option<Box<Value>>,
    /// The element constructor's format code.
    pub code: u8,
    /// The elements (the described values' inner values, for a described type).
    pub elements: Vec<Value>,
}

impl Value {
    /// Decodes one value from the front of `input`, advancing it.
    ///
    /// # Errors
    /// [`DecodeError`] when the bytes are not a valid encoding.
    pub fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        decode(input, 0)
    }

    /// Appends the value in its smallest encoding.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Self::Described(descriptor, value) => {
                out.put_u8(0x00);
                descriptor.encode(out);
                value.encode(out);
            }
            Self::Array(array) => {
                let elements = array_elements(array);
                let small = elements.len() < 0xff && array.elements.len() <= 0xff;
                out.put_u8(if small { 0xe0 } else { 0xf0 });
                put_sized(&elements, array.elements.len(), !small, out);
            }
            Self::List(items) if items.is_empty() => out.put_u8(0x45),
            Self::List(items) => encode_compound(items.iter(), items.len(), (0xc0, 0xd0), out),
            Self::Map(pairs) => encode_compound(
                pairs.iter().flat_map(|(k, v)| [k, v]),
                pairs.len() * 2,
                (0xc1, 0xd1),
                out,
            ),
            other => {
                let code = constructor_of(other);
                out.put_u8(code);
                encode_body(other, code, out);
            }
        }
    }

    /// The value encoded on its own.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(&mut out);
        out.freeze()
    }
}

/// Takes `n` bytes off `input`.
fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if input.len() < n {
        return Err(DecodeError::Truncated);
    }
    let (taken, rest) = input.split_at(n);
    *input = rest;
    Ok(taken)
}

fn byte(input: &mut &[u8]) -> Result<u8, DecodeError> {
    Ok(take(input, 1)?[0])
}

fn fixed<const N: usize>(input: &mut &[u8]) -> Result<[u8; N], DecodeError> {
    Ok(take(input, N)?.try_into().expect("N bytes"))
}

/// A size or count: one byte after a `…8` code, four after a `…32` code.
fn width(input: &mut &[u8], wide: bool) -> Result<usize, DecodeError> {
    Ok(if wide {
        u32::from_be_bytes(fixed(input)?) as usize
    } else {
        usize::from(byte(input)?)
    })
}

fn decode(input: &mut &[u8], depth: usize) -> Result<Value, DecodeError> {
    if depth > MAX_DEPTH {
        return Err(DecodeError::TooDeep);
    }
    let code = byte(input)?;
    if code == 0x00 {
        let descriptor = decode(input, depth + 1)?;
        let value = decode(input, depth + 1)?;
        return Ok(Value::Described(Box::new(descriptor), Box::new(value)));
    }
    decode_body(code, input, depth)
}

/// The value of format code `code` whose constructor was read already.
fn decode_body(code: u8, input: &mut &[u8], depth: usize) -> Result<Value, DecodeError> {
    Ok(match code {
        0x40 => Value::Null,
        0x41 => Value::Bool(true),
        0x42 => Value::Bool(false),
        0x56 => Value::Bool(byte(input)? != 0),
        0x50 => Value::Ubyte(byte(input)?),
        0x60 => Value::Ushort(u16::from_be_bytes(fixed(input)?)),
        0x70 => Value::Uint(u32::from_be_bytes(fixed(input)?)),
        0x52 => Value::Uint(u32::from(byte(input)?)),
        0x43 => Value::Uint(0),
        0x80 => Value::Ulong(u64::from_be_bytes(fixed(input)?)),
        0x53 => Value::Ulong(u64::from(byte(input)?)),
        0x44 => Value::Ulong(0),
        0x51 => Value::Byte(i8::from_be_bytes(fixed(input)?)),
        0x61 => Value::Short(i16::from_be_bytes(fixed(input)?)),
        0x71 => Value::Int(i32::from_be_bytes(fixed(input)?)),
        0x54 => Value::Int(i32::from(i8::from_be_bytes(fixed(input)?))),
        0x81 => Value::Long(i64::from_be_bytes(fixed(input)?)),
        0x55 => Value::Long(i64::from(i8::from_be_bytes(fixed(input)?))),
        0x72 => Value::Float(f32::from_be_bytes(fixed(input)?)),
        0x82 => Value::Double(f64::from_be_bytes(fixed(input)?)),
        0x74 => Value::Decimal32(fixed(input)?),
        0x84 => Value::Decimal64(fixed(input)?),
        0x94 => Value::Decimal128(fixed(input)?),
        0x73 => {
            Value::Char(char::from_u32(u32::from_be_bytes(fixed(input)?)).ok_or(DecodeError::Text)?)
        }
        0x83 => Value::Timestamp(i64::from_be_bytes(fixed(input)?)),
        0x98 => Value::Uuid(fixed(input)?),
        0xa0 | 0xb0 => {
            let n = width(input, code == 0xb0)?;
            Value::Binary(Bytes::copy_from_slice(take(input, n)?))
        }
        0xa1 | 0xb1 => {
            let n = width(input, code == 0xb1)?;
            let text = std::str::from_utf8(take(input, n)?).map_err(|_| DecodeError::Text)?;
            Value::String(text.to_owned())
        }
        0xa3 | 0xb3 => {
            let n = width(input, code == 0xb3)?;
            let text = take(input, n)?;
            if !text.is_ascii() {
                return Err(DecodeError::Text);
            }
            Value::Symbol(String::from_utf8_lossy(text).into_owned())
        }
        0x45 => Value::List(Vec::new()),
        0xc0 | 0xd0 => Value::List(compound(input, code == 0xd0, depth)?),
        0xc1 | 0xd1 => {
            let items = compound(input, code == 0xd1, depth)?;
            if items.len() % 2 != 0 {
                return Err(DecodeError::Malformed);
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut items = items.into_iter();
            while let (Some(k), Some(v)) = (items.next(), items.next()) {
                pairs.push((k, v));
            }
            Value::Map(pairs)
        }
        0xe0 | 0xf0 => Value::Array(array(input, code == 0xf0, depth)?),
        other => return Err(DecodeError::UnknownCode(other)),
    })
}

/// The elements of a list or map: size, count, then count values within size bytes.
fn compound(input: &mut &[u8], wide: bool, depth: usize) -> Result<Vec<Value>, DecodeError> {
    let size = width(input, wide)?;
    let mut body = take(input, size)?;
    let count = width(&mut body, wide)?;
    // Every element takes at least one byte.
    if count > body.len() {
        return Err(DecodeError::Malformed);
    }
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(decode(&mut body, depth + 1)?);
    }
    if !body.is_empty() {
        return Err(DecodeError::Malformed);
    }
    Ok(items)
}

/// An array: size, count, one constructor (perhaps described), then count bodies.
fn array(input: &mut &[u8], wide: bool, depth: usize) -> Result<Array, DecodeError> {
    let size = width(input, wide)?;
    let mut body = take(input, size)?;
    let count = width(&mut body, wide)?;
    let mut code = byte(&mut body)?;
    let descriptor = if code == 0x00 {
        let descriptor = decode(&mut body, depth + 1)?;
        code = byte(&mut body)?;
        Some(Box::new(descriptor))
    } else {
        None
    };
    // An element of a zero-width type (null, true, list0, …) takes no bytes: bound the
    // count by what the array's size could describe anyway.
    if count > body.len().max(size) {
        return Err(DecodeError::Malformed);
    }
    let mut elements = Vec::with_capacity(count.min(body.len() + 1));
    for _ in 0..count {
        elements.push(decode_body(code, &mut body, depth + 1)?);
    }
    if !body.is_empty() {
        return Err(DecodeError::Malformed);
    }
    Ok(Array {
        descriptor,
        code,
        elements,
    })
}

/// The smallest format code for a value that is not an array or described.
fn constructor_of(value: &Value) -> u8 {
    match value {
        Value::Null => 0x40,
        Value::Bool(true) => 0x41,
        Value::Bool(false) => 0x42,
        Value::Ubyte(_) => 0x50,
        Value::Ushort(_) => 0x60,
        Value::Uint(0) => 0x43,
        Value::Uint(n) if *n <= 0xff => 0x52,
        Value::Uint(_) => 0x70,
        Value::Ulong(0) => 0x44,
        Value::Ulong(n) if *n <= 0xff => 0x53,
        Value::Ulong(_) => 0x80,
        Value::Byte(_) => 0x51,
        Value::Short(_) => 0x61,
        Value::Int(n) if i8::try_from(*n).is_ok() => 0x54,
        Value::Int(_) => 0x71,
        Value::Long(n) if i8::try_from(*n).is_ok() => 0x55,
        Value::Long(_) => 0x81,
        Value::Float(_) => 0x72,
        Value::Double(_) => 0x82,
        Value::Decimal32(_) => 0x74,
        Value::Decimal64(_) => 0x84,
        Value::Decimal128(_) => 0x94,
        Value::Char(_) => 0x73,
        Value::Timestamp(_) => 0x83,
        Value::Uuid(_) => 0x98,
        Value::Binary(b) => small_or_wide(b.len(), 0xa0, 0xb0),
        Value::String(s) => small_or_wide(s.len(), 0xa1, 0xb1),
        Value::Symbol(s) => small_or_wide(s.len(), 0xa3, 0xb3),
        Value::List(_) | Value::Map(_) | Value::Array(_) | Value::Described(..) => {
            unreachable!("encoded by Value::encode")
        }
    }
}

fn small_or_wide(len: usize, small: u8, wide: u8) -> u8 {
    if len <= 0xff { small } else { wide }
}

/// A value's bytes after its constructor `code`.
fn encode_body(value: &Value, code: u8, out: &mut BytesMut) {
    match value {
        Value::Null | Value::Bool(_) => {
            if code == 0x56 {
                out.put_u8(u8::from(matches!(value, Value::Bool(true))));
            }
        }
        Value::Ubyte(n) => out.put_u8(*n),
        Value::Ushort(n) => out.put_u16(*n),
        Value::Uint(n) => match code {
            0x43 => {}
            0x52 => out.put_u8(*n as u8),
            _ => out.put_u32(*n),
        },
        Value::Ulong(n) => match code {
            0x44 => {}
            0x53 => out.put_u8(*n as u8),
            _ => out.put_u64(*n),
        },
        Value::Byte(n) => out.put_i8(*n),
        Value::Short(n) => out.put_i16(*n),
        Value::Int(n) => match code {
            0x54 => out.put_i8(*n as i8),
            _ => out.put_i32(*n),
        },
        Value::Long(n) => match code {
            0x55 => out.put_i8(*n as i8),
            _ => out.put_i64(*n),
        },
        Value::Float(f) => out.put_f32(*f),
        Value::Double(f) => out.put_f64(*f),
        Value::Decimal32(b) => out.put_slice(b),
        Value::Decimal64(b) => out.put_slice(b),
        Value::Decimal128(b) => out.put_slice(b),
        Value::Char(c) => out.put_u32(u32::from(*c)),
        Value::Timestamp(t) => out.put_i64(*t),
        Value::Uuid(u) => out.put_slice(u),
        Value::Binary(b) => put_variable(b, code >= 0xb0, out),
        Value::String(s) | Value::Symbol(s) => put_variable(s.as_bytes(), code >= 0xb0, out),
        Value::List(items) => put_compound(items.iter(), items.len(), code, out),
        Value::Map(pairs) => put_compound(
            pairs.iter().flat_map(|(k, v)| [k, v]),
            pairs.len() * 2,
            code,
            out,
        ),
        Value::Array(array) => {
            put_sized(
                &array_elements(array),
                array.elements.len(),
                code == 0xf0,
                out,
            );
        }
        Value::Described(..) => unreachable!("not an element type"),
    }
}

fn put_variable(bytes: &[u8], wide: bool, out: &mut BytesMut) {
    if wide {
        out.put_u32(bytes.len() as u32);
    } else {
        out.put_u8(bytes.len() as u8);
    }
    out.put_slice(bytes);
}

/// A list's or map's elements, each encoded once, in `list8`/`map8` (`codes.0`) when they
/// and their count fit in 255 bytes, else the 32-bit form.
fn encode_compound<'a>(
    items: impl Iterator<Item = &'a Value>,
    count: usize,
    codes: (u8, u8),
    out: &mut BytesMut,
) {
    let mut body = BytesMut::new();
    for item in items {
        item.encode(&mut body);
    }
    let small = body.len() < 0xff && count <= 0xff;
    out.put_u8(if small { codes.0 } else { codes.1 });
    put_sized(&body, count, !small, out);
}

/// The body of a list or map of element type `code` inside an array (whose constructor
/// fixes the width).
fn put_compound<'a>(
    items: impl Iterator<Item = &'a Value>,
    count: usize,
    code: u8,
    out: &mut BytesMut,
) {
    if code == 0x45 {
        return;
    }
    let mut body = BytesMut::new();
    for item in items {
        item.encode(&mut body);
    }
    put_sized(&body, count, code == 0xd0 || code == 0xd1, out);
}

/// Size (of the count and `body`), count, then `body`: one byte each, or four when `wide`.
fn put_sized(body: &[u8], count: usize, wide: bool, out: &mut BytesMut) {
    if wide {
        out.put_u32((body.len() + 4) as u32);
        out.put_u32(count as u32);
    } else {
        out.put_u8((body.len() + 1) as u8);
        out.put_u8(count as u8);
    }
    out.put_slice(body);
}

/// An array's one constructor (perhaps described) and its elements' bodies, each encoded
/// once.
fn array_elements(array: &Array) -> BytesMut {
    let mut body = BytesMut::new();
    if let Some(descriptor) = &array.descriptor {
        body.put_u8(0x00);
        descriptor.encode(&mut body);
    }
    body.put_u8(array.code);
    for element in &array.elements {
        encode_body(element, array.code, &mut body);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(value: Value) {
        let bytes = value.to_bytes();
        let mut input = &bytes[..];
        assert_eq!(Value::decode(&mut input), Ok(value.clone()), "{bytes:?}");
        assert!(input.is_empty());
        for end in 0..bytes.len() {
            assert!(
                Value::decode(&mut &bytes[..end]).is_err(),
                "{value:?} cut at {end}"
            );
        }
    }

    #[test]
    fn every_type_reads_back_as_written() {
        for value in [
            Value::Null,
            Value::Bool(true),
            Value::Bool(false),
            Value::Ubyte(7),
            Value::Ushort(700),
            Value::Uint(0),
            Value::Uint(200),
            Value::Uint(70_000),
            Value::Ulong(0),
            Value::Ulong(0x53),
            Value::Ulong(u64::MAX),
            Value::Byte(-1),
            Value::Short(-300),
            Value::Int(-5),
            Value::Int(1 << 20),
            Value::Long(-100),
            Value::Long(i64::MIN),
            Value::Float(1.5),
            Value::Double(-2.25),
            Value::Decimal64([1; 8]),
            Value::Char('é'),
            Value::Timestamp(1_700_000_000_000),
            Value::Uuid([9; 16]),
            Value::Binary(Bytes::from(vec![1u8; 300])),
            Value::String("orders".into()),
            Value::String("x".repeat(300)),
            Value::Symbol("text/plain".into()),
            Value::List(vec![]),
            Value::List(vec![Value::Null, Value::Uint(1), Value::String("a".into())]),
            Value::List((0..100).map(|i| Value::Long(i * 1000)).collect()),
            Value::Map(vec![(Value::Symbol("x-opt".into()), Value::Int(3))]),
            Value::Array(Array {
                descriptor: None,
                code: 0xa3,
                elements: vec![Value::Symbol("a".into()), Value::Symbol("bb".into())],
            }),
            Value::Array(Array {
                descriptor: None,
                code: 0x71,
                elements: vec![],
            }),
            Value::Described(
                Box::new(Value::Ulong(0x75)),
                Box::new(Value::Binary(Bytes::from_static(b"body"))),
            ),
        ] {
            round(value);
        }
    }

    #[test]
    fn nested_lists_and_arrays_encode_each_element_once() {
        // Encoding each level's elements more than once would take 2^30 steps here.
        let mut value = Value::List(vec![]);
        for _ in 0..30 {
            value = Value::List(vec![value, Value::Null]);
        }
        round(value);
        let mut array = Value::Array(Array {
            descriptor: None,
            code: 0x71,
            elements: vec![Value::Int(1)],
        });
        for _ in 0..30 {
            array = Value::Array(Array {
                descriptor: None,
                code: 0xf0,
                elements: vec![array],
            });
        }
        round(array);
    }

    #[test]
    fn counts_past_the_input_odd_maps_bad_text_and_deep_nesting_are_refused() {
        // list8 claiming 200 elements in 3 bytes.
        assert_eq!(
            Value::decode(&mut &[0xc0, 3, 200, 0x40, 0x40][..]),
            Err(DecodeError::Malformed)
        );
        // list32 whose size runs past the input.
        assert_eq!(
            Value::decode(&mut &[0xd0, 0xff, 0xff, 0xff, 0xff][..]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            Value::decode(&mut &[0xc1, 2, 1, 0x40][..]),
            Err(DecodeError::Malformed)
        );
        assert_eq!(
            Value::decode(&mut &[0xa1, 1, 0xff][..]),
            Err(DecodeError::Text)
        );
        assert_eq!(
            Value::decode(&mut &[0xa3, 1, 0xc3][..]),
            Err(DecodeError::Text)
        );
        assert_eq!(
            Value::decode(&mut &[0x73, 0, 0x11, 0, 0][..]),
            Err(DecodeError::Text)
        );
        assert_eq!(
            Value::decode(&mut &[0x3f][..]),
            Err(DecodeError::UnknownCode(0x3f))
        );
        // An array of two billion nulls in a few bytes.
        assert_eq!(
            Value::decode(&mut &[0xf0, 0, 0, 0, 5, 0x7f, 0xff, 0xff, 0xff, 0x40][..]),
            Err(DecodeError::Malformed)
        );
        let deep: Vec<u8> = std::iter::repeat_n([0x00, 0x44], 40)
            .flatten()
            .chain([0x40])
            .collect();
        assert_eq!(Value::decode(&mut &deep[..]), Err(DecodeError::TooDeep));
    }
}
