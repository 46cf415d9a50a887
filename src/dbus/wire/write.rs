//! The one writer of `a{sv}` (see the module doc of [`super`] for the
//! mapping): a serde serializer that writes a view straight to D-Bus wire
//! bytes in one pass, native-endian, at offset 0 (a body's start), each
//! `a{sv}`'s entries in the order of their keys' bytes (the order zbus
//! writes a nested dict in).
//!
//! Why bytes, in one pass: a focus change is three `Changed` signals, and
//! each went view → a tree of values (a `HashMap` per dict, a `String` per
//! key and value) → zbus values (a `BTreeMap` per dict, signatures
//! computed) → bytes, and then dropped all of it: the largest part of the
//! daemon's time per focus change (issue 33). Here the bytes are written
//! as the view serialises, into a buffer kept per thread.
//!
//! What one pass cannot know it corrects: a list is `as` or `aa{sv}` by
//! its elements, so its signature is written at its first element (or at
//! its end, when it has none); when a later element does not fit (a
//! mixed list), the list is marked `av` and the body written again, which
//! no view needs (only an app's published JSON can). A test holds the
//! bytes to zvariant's for every shape ([`super::reference`]).

use std::cell::RefCell;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;
use serde::ser;

use super::WireError;

/// The name of `core::view::Names` as serde reports it.
const NAMES: &str = "Names";

/// How deep containers nest, as zvariant counts them (no view nests more
/// than four dicts): arrays (each dict and list), structs (each dict
/// entry, and a `Changed` body), and the three kinds together with the
/// variants. Deeper is refused, as zvariant refuses to write it.
const MAX_ARRAYS: usize = 32;
const MAX_STRUCTS: usize = 32;
const MAX_CONTAINERS: usize = 64;

/// The D-Bus specification's longest array (64 MiB).
const MAX_ARRAY: usize = 1 << 26;

/// How an element of an `av` starts: a variant that holds the element's
/// own variant (`v` of `x`, not `x`), the bytes the broker has always
/// sent for mixed lists (clients unwrap both).
const AV_ELEMENT: &[u8] = b"v";

/// A kept buffer larger than this is given back after use.
const KEEP: usize = 64 * 1024;

/// Why a pass stopped: the value does not fit D-Bus, or list number `n`
/// (in the order the lists start) turned out mixed and is `av` next time.
#[derive(Debug)]
enum Stop {
    Bad(String),
    Retry(usize),
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Bad(m) => f.write_str(m),
            Stop::Retry(n) => write!(f, "list {n} is mixed"),
        }
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Stop::Bad(msg.to_string())
    }
}

fn bad<T>(why: &str) -> Result<T> {
    Err(Stop::Bad(why.to_owned()))
}

type Result<T> = std::result::Result<T, Stop>;

/// One `{sv}` entry written: its key's bytes and its extent in the buffer
/// (`start` 8-aligned, as every dict entry is).
struct Entry {
    key: Range<usize>,
    start: usize,
    end: usize,
}

/// The buffer the body is written into, the entries of the dicts still
/// open (to sort each when it closes), and room to sort in.
#[derive(Default)]
struct Wire {
    buf: Vec<u8>,
    entries: Vec<Entry>,
    scratch: Vec<u8>,
    /// The containers the value being written is in (see [`MAX_ARRAYS`]).
    arrays: usize,
    structs: usize,
    variants: usize,
    /// Lists started in this pass (their numbers, for [`Stop::Retry`]).
    lists: usize,
    /// The lists found mixed by earlier passes of this body: `av`.
    mixed: Vec<usize>,
}

/// An open `a{sv}`: where its length goes, where its first entry starts,
/// and where its entries begin in `Wire::entries`.
struct Open {
    len_at: usize,
    first: usize,
    mark: usize,
}

fn pad(buf: &mut Vec<u8>, align: usize) {
    let n = buf.len().next_multiple_of(align);
    buf.resize(n, 0);
}

impl Wire {
    /// Empty for a pass (what earlier passes learned stays).
    fn reset(&mut self) {
        self.buf.clear();
        self.entries.clear();
        self.arrays = 0;
        self.structs = 0;
        self.variants = 0;
        self.lists = 0;
    }

    fn u32(&mut self, v: u32) {
        pad(&mut self.buf, 4);
        self.buf.extend_from_slice(&v.to_ne_bytes());
    }

    fn str(&mut self, s: &str) -> Result<()> {
        let Ok(len) = u32::try_from(s.len()) else {
            return bad("a string over 4 GiB");
        };
        self.u32(len);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
        Ok(())
    }

    /// A variant's signature (every one written here is under 256 bytes).
    fn sig(&mut self, sig: &[u8]) {
        self.buf.push(sig.len() as u8);
        self.buf.extend_from_slice(sig);
        self.buf.push(0);
    }

    /// Go into `arrays`, `structs` and `variants` more containers.
    fn deeper(&mut self, arrays: usize, structs: usize, variants: usize) -> Result<()> {
        self.arrays += arrays;
        self.structs += structs;
        self.variants += variants;
        if self.arrays > MAX_ARRAYS
            || self.structs > MAX_STRUCTS
            || self.arrays + self.structs + self.variants > MAX_CONTAINERS
        {
            return bad("nested deeper than D-Bus allows");
        }
        Ok(())
    }

    /// Start an `a{sv}` value here (its signature, if any, written).
    fn open(&mut self) -> Result<Open> {
        self.deeper(1, 0, 0)?;
        pad(&mut self.buf, 4);
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        pad(&mut self.buf, 8);
        Ok(Open {
            len_at,
            first: self.buf.len(),
            mark: self.entries.len(),
        })
    }

    /// End the `a{sv}` `o`: its entries in key order, a key said twice
    /// with its last value (as a map keeps it), its length.
    fn close(&mut self, o: Open) -> Result<()> {
        self.arrays -= 1;
        let buf = &mut self.buf;
        let entries = &mut self.entries[o.mark..];
        let sorted = entries
            .windows(2)
            .all(|w| buf[w[0].key.clone()] < buf[w[1].key.clone()]);
        if !sorted {
            // Stable: of the entries with one key, the last written is
            // last.
            entries.sort_by(|a, b| buf[a.key.clone()].cmp(&buf[b.key.clone()]));
            let mut kept = 0;
            for i in 0..entries.len() {
                let last = entries
                    .get(i + 1)
                    .is_none_or(|next| buf[entries[i].key.clone()] != buf[next.key.clone()]);
                if last {
                    entries.swap(kept, i);
                    kept += 1;
                }
            }
            // Every entry starts 8-aligned, and so does the first: an
            // entry's bytes are the same at any 8-aligned place.
            self.scratch.clear();
            self.scratch.extend_from_slice(&buf[o.first..]);
            buf.truncate(o.first);
            for e in entries[..kept].iter() {
                pad(buf, 8);
                buf.extend_from_slice(&self.scratch[e.start - o.first..e.end - o.first]);
            }
        }
        self.entries.truncate(o.mark);
        let len = self.buf.len() - o.first;
        if len > MAX_ARRAY {
            return bad("an array over 64 MiB");
        }
        self.buf[o.len_at..o.len_at + 4].copy_from_slice(&(len as u32).to_ne_bytes());
        Ok(())
    }

    /// Begin a dict entry: where to cut back to if its value is left
    /// out, and where it starts.
    fn entry(&mut self) -> (usize, usize) {
        let undo = self.buf.len();
        pad(&mut self.buf, 8);
        (undo, self.buf.len())
    }
}

thread_local! {
    static WIRE: RefCell<Wire> = RefCell::new(Wire::default());
}

/// The body of `Changed(category, view)`: `(s, a{sv})`.
pub(super) fn changed<T: Serialize + ?Sized>(
    category: &str,
    view: &T,
) -> std::result::Result<Arc<[u8]>, WireError> {
    with_wire(|w| {
        // The body is a struct, `(s, a{sv})`.
        w.deeper(0, 1, 0)?;
        w.str(category)?;
        write_view(w, view)
    })
}

/// A view as a bare `a{sv}` body.
pub(super) fn dict<T: Serialize + ?Sized>(view: &T) -> std::result::Result<Arc<[u8]>, WireError> {
    with_wire(|w| write_view(w, view))
}

/// Views as a bare `aa{sv}` body, and `tail` after it when given: the
/// body of a list reply, `aa{sv}` or `(aa{sv}, s)` (a page and its next
/// cursor). Each element is written as [`dict`] writes a body.
pub(super) fn dicts<T: Serialize>(
    items: &[T],
    tail: Option<&str>,
) -> std::result::Result<Arc<[u8]>, WireError> {
    with_wire(|w| {
        if tail.is_some() {
            // The body is a struct, `(aa{sv}, s)`.
            w.deeper(0, 1, 0)?;
        }
        w.deeper(1, 0, 0)?;
        w.u32(0);
        // A dict aligns at 4, as the length leaves it.
        let first = w.buf.len();
        for item in items {
            write_top(w, item)?;
        }
        w.arrays -= 1;
        let len = w.buf.len() - first;
        if len > MAX_ARRAY {
            return bad("an array over 64 MiB");
        }
        w.buf[first - 4..first].copy_from_slice(&(len as u32).to_ne_bytes());
        if let Some(s) = tail {
            w.str(s)?;
        }
        Ok(Arc::from(&w.buf[..]))
    })
}

/// `write` into this thread's buffer, emptied first (a fresh one when a
/// body is written while another is: a view whose `Serialize` writes a
/// body, which none does).
fn with_wire(
    write: impl Fn(&mut Wire) -> Result<Arc<[u8]>>,
) -> std::result::Result<Arc<[u8]>, WireError> {
    WIRE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut w) => {
            let out = passes(&mut w, &write);
            if w.buf.capacity() > KEEP {
                *w = Wire::default();
            }
            out
        }
        Err(_) => passes(&mut Wire::default(), &write),
    })
}

/// Write until a pass ends without finding a mixed list (once for every
/// view; one more per mixed list of a published entry).
fn passes(
    w: &mut Wire,
    write: &impl Fn(&mut Wire) -> Result<Arc<[u8]>>,
) -> std::result::Result<Arc<[u8]>, WireError> {
    w.mixed.clear();
    loop {
        w.reset();
        match write(w) {
            Ok(body) => return Ok(body),
            Err(Stop::Bad(why)) => return Err(WireError(why)),
            // Each pass marks one more list: as many passes as lists.
            Err(Stop::Retry(n)) if !w.mixed.contains(&n) => w.mixed.push(n),
            Err(Stop::Retry(_)) => return Err(WireError("a list that is never one type".into())),
        }
    }
}

fn write_view<T: Serialize + ?Sized>(w: &mut Wire, view: &T) -> Result<Arc<[u8]>> {
    write_top(w, view)?;
    Ok(Arc::from(&w.buf[..]))
}

/// `view` as an `a{sv}` here (an empty one for a view that is nothing).
fn write_top<T: Serialize + ?Sized>(w: &mut Wire, view: &T) -> Result<()> {
    let done = view.serialize(Value {
        w,
        ctx: Ctx::Top,
        names: false,
    })?;
    if let Out::Skip = done {
        let o = w.open()?;
        w.close(o)?;
    }
    Ok(())
}

/// Where a value is being written.
enum Ctx<'a> {
    /// The body's `a{sv}`: only a dict (or nothing: an empty one).
    Top,
    /// The value of a dict entry, or an element of an `av`: a variant.
    Field,
    /// An element of a list, whose type its first element decides.
    Elem(&'a mut List),
    /// A dict key: a string, or a number written out.
    Key,
}

/// What a value came to: left out (`None`, unit) or written.
enum Out {
    Skip,
    Done,
}

/// The serialiser of one value.
struct Value<'a> {
    w: &'a mut Wire,
    ctx: Ctx<'a>,
    /// The value is a `Names`: a list, `as` even when empty.
    names: bool,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Undecided,
    Strings,
    Dicts,
    Variants,
}

/// How an element is written in its list.
enum Place {
    /// As itself (a string of an `as`, a dict of an `aa{sv}`).
    Bare,
    /// As a variant (an element of an `av`).
    Variant,
}

/// A list being written (the value of a dict entry).
struct List {
    kind: Kind,
    names: bool,
    /// Its number in the pass, for [`Stop::Retry`].
    number: usize,
    len_at: usize,
    first: usize,
}

impl List {
    /// An element of `kind` comes: the list's type, if undecided, is
    /// decided (its signature written at the first element); a list of
    /// two kinds is `av` in the next pass.
    fn decide(&mut self, w: &mut Wire, kind: Kind) -> Result<Place> {
        if self.kind == Kind::Undecided {
            self.kind = kind;
            self.start(w);
        }
        match self.kind {
            Kind::Variants => Ok(Place::Variant),
            k if k == kind => Ok(Place::Bare),
            _ => Err(Stop::Retry(self.number)),
        }
    }

    fn start(&mut self, w: &mut Wire) {
        w.sig(match self.kind {
            Kind::Strings => b"as",
            Kind::Variants => b"av",
            Kind::Undecided if self.names => b"as",
            Kind::Dicts | Kind::Undecided => b"aa{sv}",
        });
        w.u32(0);
        self.len_at = w.buf.len() - 4;
        // Strings and dicts align at 4, as the length leaves it;
        // variants at 1.
        self.first = w.buf.len();
    }
}

impl<'a> Value<'a> {
    fn plain(&self) -> Result<()> {
        if self.names {
            bad("a Names that is not a list")
        } else {
            Ok(())
        }
    }

    /// Where a value that is not a string or a dict goes: a dict entry's
    /// variant, or an element of an `av` (the list is one from here).
    fn variant(self) -> Result<Value<'a>> {
        match self.ctx {
            Ctx::Field => Ok(self),
            Ctx::Elem(list) => {
                list.decide(self.w, Kind::Variants)?;
                self.w.deeper(0, 0, 2)?;
                self.w.sig(AV_ELEMENT);
                Ok(Value {
                    w: self.w,
                    ctx: Ctx::Field,
                    names: self.names,
                })
            }
            Ctx::Top => bad("only a struct or a map is an a{sv}"),
            Ctx::Key => bad("a dict key must be a string or a number"),
        }
    }

    /// A basic value: as a variant of `sig`.
    fn basic(self, sig: &[u8], align: usize, bytes: &[u8]) -> Result<Out> {
        self.plain()?;
        let v = self.variant()?;
        v.w.sig(sig);
        pad(&mut v.w.buf, align);
        v.w.buf.extend_from_slice(bytes);
        Ok(Out::Done)
    }

    fn int(self, i: i64) -> Result<Out> {
        if let Ctx::Key = self.ctx {
            self.w.str(&i.to_string())?;
            return Ok(Out::Done);
        }
        self.basic(b"x", 8, &i.to_ne_bytes())
    }

    fn string(self, s: &str) -> Result<Out> {
        self.plain()?;
        match self.ctx {
            Ctx::Field => {
                self.w.sig(b"s");
                self.w.str(s)?;
            }
            Ctx::Key => self.w.str(s)?,
            Ctx::Elem(list) => {
                if let Place::Variant = list.decide(self.w, Kind::Strings)? {
                    self.w.deeper(0, 0, 2)?;
                    self.w.sig(AV_ELEMENT);
                    self.w.sig(b"s");
                }
                self.w.str(s)?;
            }
            Ctx::Top => return bad("only a struct or a map is an a{sv}"),
        }
        Ok(Out::Done)
    }

    fn skip(self) -> Result<Out> {
        self.plain()?;
        match self.ctx {
            Ctx::Key => bad("a dict key must be a string or a number"),
            _ => Ok(Out::Skip),
        }
    }

    /// Open an `a{sv}` as this value.
    fn dict(self, variant: Option<&'static str>) -> Result<Dict<'a>> {
        self.plain()?;
        match self.ctx {
            Ctx::Top => {}
            Ctx::Field => self.w.sig(b"a{sv}"),
            Ctx::Elem(list) => {
                if let Place::Variant = list.decide(self.w, Kind::Dicts)? {
                    self.w.deeper(0, 0, 2)?;
                    self.w.sig(AV_ELEMENT);
                    self.w.sig(b"a{sv}");
                }
            }
            Ctx::Key => return bad("a dict key must be a string or a number"),
        }
        let open = self.w.open()?;
        let mut d = Dict {
            w: self.w,
            open,
            key: None,
            outer: None,
        };
        if let Some(name) = variant {
            // A struct variant: `{name: a{sv} of its fields}`.
            let (_, start) = d.w.entry();
            d.w.str(name)?;
            let key = start + 4..start + 4 + name.len();
            d.w.sig(b"a{sv}");
            d.w.deeper(0, 1, 1)?;
            let inner = d.w.open()?;
            d.outer = Some((std::mem::replace(&mut d.open, inner), key, start));
        }
        Ok(d)
    }
}

/// An `a{sv}` being written.
struct Dict<'a> {
    w: &'a mut Wire,
    open: Open,
    /// `SerializeMap`: the key written, waiting for its value (where to
    /// cut back to, where the entry starts, the key's bytes).
    key: Option<(usize, usize, Range<usize>)>,
    /// A struct variant's outer dict, its one entry's key and start.
    outer: Option<(Open, Range<usize>, usize)>,
}

impl Dict<'_> {
    fn value<T: Serialize + ?Sized>(
        &mut self,
        (undo, start, key): (usize, usize, Range<usize>),
        value: &T,
    ) -> Result<()> {
        self.w.deeper(0, 1, 1)?;
        let out = value.serialize(Value {
            w: self.w,
            ctx: Ctx::Field,
            names: false,
        })?;
        self.w.structs -= 1;
        self.w.variants -= 1;
        match out {
            Out::Skip => self.w.buf.truncate(undo),
            Out::Done => self.w.entries.push(Entry {
                key,
                start,
                end: self.w.buf.len(),
            }),
        }
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) -> Result<()> {
        let (undo, start) = self.w.entry();
        self.w.str(name)?;
        let key = start + 4..start + 4 + name.len();
        self.value((undo, start, key), value)
    }

    fn end(self) -> Result<Out> {
        self.w.close(self.open)?;
        if let Some((outer, key, start)) = self.outer {
            self.w.structs -= 1;
            self.w.variants -= 1;
            self.w.entries.push(Entry {
                key,
                start,
                end: self.w.buf.len(),
            });
            self.w.close(outer)?;
        }
        Ok(Out::Done)
    }
}

/// A list being written, with its [`List`] state.
struct Seq<'a> {
    w: &'a mut Wire,
    list: List,
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let variants = self.w.variants;
        value.serialize(Value {
            w: self.w,
            ctx: Ctx::Elem(&mut self.list),
            names: false,
        })?;
        self.w.variants = variants;
        Ok(())
    }

    fn end(mut self) -> Result<Out> {
        self.w.arrays -= 1;
        if self.list.kind == Kind::Undecided {
            self.list.start(self.w);
            return Ok(Out::Done);
        }
        let len = self.w.buf.len() - self.list.first;
        if len > MAX_ARRAY {
            return bad("an array over 64 MiB");
        }
        let at = self.list.len_at;
        self.w.buf[at..at + 4].copy_from_slice(&(len as u32).to_ne_bytes());
        Ok(Out::Done)
    }
}

impl<'a> ser::Serializer for Value<'a> {
    type Ok = Out;
    type Error = Stop;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Dict<'a>;
    type SerializeStruct = Dict<'a>;
    type SerializeStructVariant = Dict<'a>;

    fn serialize_bool(self, v: bool) -> Result<Out> {
        self.basic(b"b", 4, &u32::from(v).to_ne_bytes())
    }
    fn serialize_i8(self, v: i8) -> Result<Out> {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Out> {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Out> {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<Out> {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Out> {
        self.int(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<Out> {
        self.int(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<Out> {
        self.int(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<Out> {
        match i64::try_from(v) {
            Ok(i) => self.int(i),
            Err(_) if matches!(self.ctx, Ctx::Key) => {
                self.w.str(&v.to_string())?;
                Ok(Out::Done)
            }
            Err(_) => self.basic(b"t", 8, &v.to_ne_bytes()),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<Out> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<Out> {
        self.basic(b"d", 8, &v.to_ne_bytes())
    }
    fn serialize_char(self, v: char) -> Result<Out> {
        self.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<Out> {
        self.string(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Out> {
        self.plain()?;
        let Ok(len) = u32::try_from(v.len()) else {
            return bad("an array over 64 MiB");
        };
        let f = self.variant()?;
        f.w.sig(b"ay");
        f.w.u32(len);
        f.w.buf.extend_from_slice(v);
        Ok(Out::Done)
    }
    fn serialize_none(self) -> Result<Out> {
        self.skip()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<Out> {
        self.plain()?;
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Out> {
        self.skip()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Out> {
        self.skip()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<Out> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<Out> {
        self.plain()?;
        if name == NAMES {
            // A list: `as`, even empty.
            let f = self.variant()?;
            return value.serialize(Value {
                w: f.w,
                ctx: Ctx::Field,
                names: true,
            });
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Out> {
        let mut d = self.dict(None)?;
        d.field(variant, value)?;
        d.end()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>> {
        let names = self.names;
        let f = Value {
            names: false,
            ..self
        }
        .variant()?;
        f.w.deeper(1, 0, 0)?;
        let number = f.w.lists;
        f.w.lists += 1;
        let mut list = List {
            kind: Kind::Undecided,
            names,
            number,
            len_at: 0,
            first: 0,
        };
        if f.w.mixed.contains(&number) {
            list.kind = Kind::Variants;
            list.start(f.w);
        }
        Ok(Seq { w: f.w, list })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        len: usize,
    ) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Dict<'a>> {
        self.dict(None)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Dict<'a>> {
        self.dict(None)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Dict<'a>> {
        self.dict(Some(variant))
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = Out;
    type Error = Stop;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<Out> {
        Seq::end(self)
    }
}

impl ser::SerializeTuple for Seq<'_> {
    type Ok = Out;
    type Error = Stop;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<Out> {
        Seq::end(self)
    }
}

impl ser::SerializeTupleStruct for Seq<'_> {
    type Ok = Out;
    type Error = Stop;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<Out> {
        Seq::end(self)
    }
}

impl ser::SerializeTupleVariant for Seq<'_> {
    type Ok = Out;
    type Error = Stop;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<Out> {
        Seq::end(self)
    }
}

impl ser::SerializeMap for Dict<'_> {
    type Ok = Out;
    type Error = Stop;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<()> {
        let (undo, start) = self.w.entry();
        key.serialize(Value {
            w: self.w,
            ctx: Ctx::Key,
            names: false,
        })?;
        // The key string's bytes: after its length, before its NUL.
        let key = start + 4..self.w.buf.len() - 1;
        self.key = Some((undo, start, key));
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        let Some(key) = self.key.take() else {
            return bad("a dict value without a key");
        };
        self.value(key, value)
    }
    fn end(self) -> Result<Out> {
        Dict::end(self)
    }
}

impl ser::SerializeStruct for Dict<'_> {
    type Ok = Out;
    type Error = Stop;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.field(key, value)
    }
    fn end(self) -> Result<Out> {
        Dict::end(self)
    }
}

impl ser::SerializeStructVariant for Dict<'_> {
    type Ok = Out;
    type Error = Stop;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.field(key, value)
    }
    fn end(self) -> Result<Out> {
        Dict::end(self)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use zbus::wire::Variant;

    use super::*;
    use crate::core::view::{
        ChangeView, GeoView, Names, NetworkView, NotificationView, PlaceView, ProvidedView,
        RecentDocumentView, StreamView, WindowView,
    };
    use crate::dbus::wire::reference;
    use crate::model::{
        MediaKind, PlaybackStatus, Player, Power, SessionState, StreamState, Urgency,
    };

    /// The body as zvariant writes the reference tree
    /// ([`super::super::reference`]), its outer dict's entries in key
    /// order (that tree's outer `HashMap` has an order of its own per
    /// process; every nested dict is in key order already).
    fn reference<T: Serialize + ?Sized>(category: &str, view: &T) -> Option<Vec<u8>> {
        let fields = reference::fields(view).ok()?;
        let sorted: BTreeMap<String, Variant<'static>> = fields.into_iter().collect();
        let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
        let data = zbus::wire::to_bytes(ctxt, &(category.to_owned(), sorted)).ok()?;
        Some(data.to_vec())
    }

    /// The writer gives zvariant's bytes, or both refuse; and what it
    /// writes reads back as a `Changed` body.
    #[track_caller]
    fn same<T: Serialize + ?Sized>(category: &str, view: &T) {
        let old = reference(category, view);
        let new = changed(category, view).ok().map(|b| b.to_vec());
        match (&old, &new) {
            (Some(o), Some(n)) => assert_eq!(&o[..], &n[..], "{category}"),
            (None, None) => {}
            (Some(_), None) => panic!("{category}: refused here, written there"),
            (None, Some(_)) => panic!("{category}: written here, refused there"),
        }
        if let Some(n) = new {
            let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
            let data = zbus::wire::serialized::Data::new(n, ctxt);
            let (back, _): ((String, HashMap<String, zbus::wire::OwnedVariant>), _) =
                data.deserialize().expect("reads back");
            assert_eq!(back.0, category);
        }
    }

    fn window(title: Option<&str>, states: &[&str], outputs: &[&str]) -> WindowView {
        WindowView {
            id: "w-3f2a".into(),
            app_id: "org.gnome.TextEditor".into(),
            app_id_source: "wayland",
            app_name: Some("Text Editor".into()),
            icon: None,
            title: title.map(Into::into),
            hidden: None,
            states: Names(states.iter().map(|s| (*s).to_owned()).collect()),
            focused: true,
            outputs: Names(outputs.iter().map(|s| (*s).to_owned()).collect()),
            parent: Some("w-1".into()),
            first_seen: "2026-11-27T05:40:00.123Z".into(),
            last_focused: None,
            identity: crate::core::view::WindowIdentityView {
                known_by: "compositor",
                app: Some("exe:/usr/bin/gnome-text-editor".into()),
                app_source: Some("executable"),
                sandbox: None,
            },
        }
    }

    fn stream(player: Option<Player>) -> StreamView {
        StreamView {
            id: "pw-88".into(),
            kind: MediaKind::Screen,
            state: StreamState::Running,
            active: true,
            since: "2026-11-27T05:40:00Z".into(),
            app_id: Some("org.mozilla.firefox".into()),
            app_id_source: Some("kernel"),
            pid: Some(u32::MAX),
            claimed_name: None,
            claimed_binary: Some("firefox-bin".into()),
            media_name: Some("Meeting — ünïcødé 🎥".into()),
            media_role: None,
            player,
        }
    }

    /// Every kind of change a subscriber receives, each with its options
    /// present and absent.
    #[test]
    fn every_change_view_is_zvariants_bytes() {
        let long = "a long title ".repeat(400);
        let windows = [
            window(
                Some("notes.txt — Text Editor"),
                &["activated", "maximized"],
                &["HEADLESS-1"],
            ),
            window(None, &[], &[]),
            window(Some(""), &["activated"], &["HEADLESS-1", "DP-2", "ünï"]),
            window(Some(&long), &[], &["X"]),
        ];
        for (i, w) in windows.into_iter().enumerate() {
            for event in ["focus", "created", "changed", "closed"] {
                let v = ChangeView {
                    event,
                    window: Some(w.clone()),
                    ..Default::default()
                };
                same(&format!("windows{i}"), &v);
            }
        }
        same(
            "windows",
            &ChangeView {
                event: "focus",
                ..Default::default()
            },
        );
        for player in [
            None,
            Some(Player::default()),
            Some(Player {
                status: Some(PlaybackStatus::Paused),
                title: Some("Track".into()),
                artist: Some("A, B".into()),
                url: Some("https://example.org/x".into()),
            }),
        ] {
            let v = ChangeView {
                event: "added",
                stream: Some(stream(player)),
                ..Default::default()
            };
            same("media.capture", &v);
        }
        let sessions = [
            SessionState::default(),
            SessionState {
                active: true,
                locked: true,
                idle: true,
                idle_since: Some(chrono::Utc::now()),
                preparing_for_sleep: true,
                do_not_disturb: Some(true),
                do_not_disturb_by: Some(crate::model::DndSource::NotificationServer),
            },
        ];
        for s in sessions {
            let v = ChangeView {
                event: "changed",
                session: Some(s),
                ..Default::default()
            };
            same("session", &v);
        }
        let powers = [
            Power::default(),
            Power {
                on_battery: true,
                lid_closed: Some(true),
                percentage: Some(42.5),
                state: Some("discharging".into()),
                time_to_empty_s: Some(u64::MAX),
                time_to_full_s: Some(0),
                warning_level: Some("low".into()),
            },
        ];
        for p in powers {
            let v = ChangeView {
                event: "changed",
                power: Some(p),
                ..Default::default()
            };
            same("power", &v);
        }
        for ssid in [None, Some("café wifi".to_owned())] {
            let v = ChangeView {
                event: "changed",
                network: Some(NetworkView {
                    connectivity: "full".into(),
                    metered: ssid.is_some(),
                    primary_type: Some("wifi".into()),
                    ssid,
                }),
                ..Default::default()
            };
            same("network", &v);
        }
        for body in [None, Some("hello\nworld".to_owned())] {
            let whole = body.is_some();
            let v = ChangeView {
                event: "added",
                notification: Some(NotificationView {
                    id: "17".into(),
                    app_name: "Mail".into(),
                    summary: "New mail".into(),
                    urgency: Urgency::Critical,
                    time: "2026-11-27T05:40:00Z".into(),
                    body,
                    hidden: None,
                    icon: whole.then(|| "mail-unread".into()),
                    actions: whole.then(|| vec!["Reply".into(), "Archive".into()]),
                    transient: whole,
                    resident: whole,
                    closed: whole.then_some(crate::model::CloseReason::Dismissed),
                }),
                ..Default::default()
            };
            same("notifications", &v);
        }
        let data = [
            serde_json::json!({"@type": "DigitalDocument", "name": "n"}),
            serde_json::json!({
                "@type": "Event",
                "z": 1, "a": -1, "m": 1.5, "big": u64::MAX, "t": true, "f": false,
                "nested": {"b": {"c": {"d": "deep"}}, "a": []},
                "names": ["x", "y"],
                "objs": [{"k": 1}, {"k": 2, "j": null}],
                "empty": {},
                "null": null,
                "unicode": "日本語 ✓",
            }),
            // Lists of other elements, and mixed (`av`).
            serde_json::json!({"nums": [1, 2, 3]}),
            serde_json::json!({"mixed": [1, "a", {"k": 1}]}),
            serde_json::json!({"strs_objs": ["a", {"k": 1}]}),
            serde_json::json!({"lists": [["a"], ["b"]]}),
        ];
        for (i, d) in data.iter().enumerate() {
            let v = ChangeView {
                event: "updated",
                context: Some(ProvidedView {
                    app_id: crate::model::AppId::new("org.example.App").expect("app id"),
                    kind: "document".into(),
                    data: d.clone().into(),
                    updated: "2026-11-27T05:40:00Z".into(),
                }),
                ..Default::default()
            };
            same(&format!("provided.document{i}"), &v);
        }
        let doc = |path: Option<&str>| RecentDocumentView {
            uri: "file:///home/u/a%20b.txt".into(),
            path: path.map(Into::into),
            name: "a b.txt".into(),
            mime_type: Some("text/plain".into()),
            app: None,
            modified: Some("2026-11-27T05:40:00Z".into()),
            visited: None,
        };
        for docs in [
            vec![],
            vec![doc(None)],
            vec![doc(Some("/home/u/a b.txt")), doc(None)],
        ] {
            let v = ChangeView {
                event: "changed",
                recent_documents: Some(docs),
                ..Default::default()
            };
            same("documents.recent", &v);
        }
        for precise in [false, true] {
            let v = ChangeView {
                event: "changed",
                location: Some(PlaceView {
                    schema_type: "Place",
                    geo: GeoView {
                        latitude: 52.52,
                        longitude: -13.4,
                        elevation: precise.then_some(34.0),
                    },
                    accuracy: 1000.0,
                    name: precise.then(|| "Berlin".into()),
                    updated: precise.then(|| "2026-11-27T05:40:00Z".into()),
                }),
                ..Default::default()
            };
            same("location", &v);
        }
    }

    #[derive(Serialize)]
    enum E {
        Unit,
        Newtype(i8),
        Tuple(u16, u16),
        Struct { b: bool, a: Option<f32> },
    }

    struct Bytes(&'static [u8]);

    impl Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    /// A map that says a key twice.
    struct Twice;

    impl Serialize for Twice {
        fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut m = s.serialize_map(None)?;
            m.serialize_entry("k", &1)?;
            m.serialize_entry("k", &2)?;
            m.end()
        }
    }

    /// Dicts of lists of dicts.
    type Lists = BTreeMap<&'static str, Vec<BTreeMap<&'static str, i64>>>;

    #[derive(Serialize)]
    struct Everything {
        zed: &'static str,
        i8: i8,
        i16: i16,
        i32: i32,
        i64: i64,
        u8: u8,
        u16: u16,
        u32: u32,
        u64: u64,
        u64_big: u64,
        f32: f32,
        f64: f64,
        ch: char,
        unit: (),
        none: Option<u8>,
        some: Option<Option<&'static str>>,
        bytes: Bytes,
        names: Names,
        empty_names: Names,
        opt_names: Option<Names>,
        empty_list: Vec<E>,
        units: Vec<E>,
        skipped: Vec<Option<String>>,
        strings: Vec<String>,
        unit_variants: Vec<E>,
        struct_variants: Vec<E>,
        newtype_variant: E,
        struct_variant: E,
        unit_variant: E,
        int_keys: BTreeMap<u64, &'static str>,
        char_keys: BTreeMap<char, u8>,
        nested: BTreeMap<&'static str, Lists>,
        #[serde(rename = "A")]
        upper: bool,
        #[serde(rename = "a.b")]
        dotted: bool,
        #[serde(rename = "")]
        empty_key: bool,
    }

    fn everything() -> Everything {
        Everything {
            zed: "z",
            i8: i8::MIN,
            i16: i16::MIN,
            i32: i32::MIN,
            i64: i64::MIN,
            u8: u8::MAX,
            u16: u16::MAX,
            u32: u32::MAX,
            u64: i64::MAX as u64,
            u64_big: u64::MAX,
            f32: -0.25,
            f64: f64::MAX,
            ch: 'ß',
            unit: (),
            none: None,
            some: Some(Some("x")),
            bytes: Bytes(b"\x00\x01binary"),
            names: Names(vec!["a".into(), "".into(), "ü".into()]),
            empty_names: Names::default(),
            opt_names: Some(Names::default()),
            empty_list: vec![],
            units: vec![E::Unit, E::Unit],
            skipped: vec![None, Some("only".into()), None],
            strings: vec!["x".repeat(70_000)],
            unit_variants: vec![E::Unit],
            struct_variants: vec![
                E::Struct { b: true, a: None },
                E::Newtype(3),
                E::Struct {
                    b: false,
                    a: Some(1.0),
                },
            ],
            newtype_variant: E::Newtype(-1),
            struct_variant: E::Struct {
                b: true,
                a: Some(2.5),
            },
            unit_variant: E::Unit,
            int_keys: BTreeMap::from([(3, "three"), (10, "ten"), (u64::MAX, "max")]),
            char_keys: BTreeMap::from([('b', 1), ('a', 2)]),
            nested: BTreeMap::from([
                (
                    "outer",
                    BTreeMap::from([("l", vec![BTreeMap::from([("x", 1)]), BTreeMap::new()])]),
                ),
                ("empty", BTreeMap::new()),
            ]),
            upper: true,
            dotted: false,
            empty_key: true,
        }
    }

    /// Every serde shape the mapping knows, at every place it can be.
    #[test]
    fn every_shape_is_zvariants_bytes() {
        same("everything", &everything());
        same("nested", &BTreeMap::from([("inner", everything())]));
        same(
            "list",
            &BTreeMap::from([("l", vec![everything(), everything()])]),
        );
        same("none", &None::<u8>);
        same("unit", &());
        same("empty", &BTreeMap::<String, u8>::new());
        same("tuple", &BTreeMap::from([("t", E::Tuple(1, 2))]));
        same("top newtype variant", &E::Newtype(5));
        same("top struct variant", &E::Struct { b: true, a: None });
        // Not a dict at the top: both refuse; the rest is written.
        same("top string", &"s");
        same("top list", &vec![1]);
        same("twice", &Twice);
        same("bool keys", &BTreeMap::from([(true, 1)]));
        same(
            "bytes in a list",
            &BTreeMap::from([("l", vec![Bytes(b"x")])]),
        );
        same(
            "names in a list",
            &BTreeMap::from([("l", vec![Names::default()])]),
        );
        // Mixed lists, found mixed late, nested in each other.
        for (i, v) in [
            serde_json::json!({"l": ["a", "b", 1]}),
            serde_json::json!({"l": [{"k": 1}, {"k": 2}, "x"]}),
            serde_json::json!({"l": [null, "a", null, {"k": [1, "x", ["y", {"z": [true, 2.5]}]]}]}),
            serde_json::json!({"l": [["a"], [], [{"k": 1}, "m"]], "m": [[1, 2], "x"]}),
            serde_json::json!({"a": ["s", 1], "b": ["s", 1], "c": [{"x": ["p", {"q": 1}]}, 3]}),
        ]
        .iter()
        .enumerate()
        {
            same(&format!("mixed{i}"), v);
        }
    }

    /// A list reply's body (`aa{sv}`, or `(aa{sv}, s)` with `tail`) as
    /// zvariant writes the reference trees (each outer dict in key order),
    /// or `None` when the reference refuses an item.
    fn reference_list<T: Serialize>(items: &[T], tail: Option<&str>) -> Option<Vec<u8>> {
        let mut dicts: Vec<BTreeMap<String, Variant<'static>>> = Vec::new();
        for item in items {
            dicts.push(reference::fields(item).ok()?.into_iter().collect());
        }
        let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
        let data = match tail {
            None => zbus::wire::to_bytes(ctxt, &dicts),
            Some(t) => zbus::wire::to_bytes(ctxt, &(dicts, t.to_owned())),
        };
        Some(data.ok()?.to_vec())
    }

    /// The list writer gives zvariant's bytes, or both refuse; and what
    /// it writes reads back as the list (and the cursor).
    #[track_caller]
    fn same_list<T: Serialize>(what: &str, items: &[T]) {
        for tail in [None, Some(""), Some("cursör:17")] {
            let old = reference_list(items, tail);
            let new = dicts(items, tail).ok().map(|b| b.to_vec());
            match (&old, &new) {
                (Some(o), Some(n)) => assert_eq!(&o[..], &n[..], "{what} {tail:?}"),
                (None, None) => {}
                (Some(_), None) => panic!("{what}: refused here, written there"),
                (None, Some(_)) => panic!("{what}: written here, refused there"),
            }
            let Some(n) = new else { continue };
            let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
            let data = zbus::wire::serialized::Data::new(n, ctxt);
            type D = HashMap<String, zbus::wire::OwnedVariant>;
            let len = match tail {
                None => data.deserialize::<Vec<D>>().expect("reads back").0.len(),
                Some(t) => {
                    let ((l, c), _) = data.deserialize::<(Vec<D>, String)>().expect("reads back");
                    assert_eq!(c, t);
                    l.len()
                }
            };
            assert_eq!(len, items.len(), "{what}");
        }
    }

    /// Lists of every view shape, empty, of one and of many (the replies
    /// of `ListWindows`, `GetProvided`, `History1.Query`, …), each item
    /// as the reference writes a dict; a mixed list in a later item, and
    /// an item that is not a dict, as the reference has them.
    #[test]
    fn every_list_body_is_zvariants_bytes() {
        same_list("no windows", &Vec::<WindowView>::new());
        same_list("one window", &[window(Some("t"), &["activated"], &["A"])]);
        same_list(
            "windows",
            &[
                window(Some("notes — ü"), &["activated", "maximized"], &["A", "B"]),
                window(None, &[], &[]),
                window(Some(&"long ".repeat(3000)), &[], &["X"]),
            ],
        );
        same_list("everything", &[everything()]);
        same_list("everythings", &[everything(), everything(), everything()]);
        same_list("streams", &[stream(None), stream(Some(Player::default()))]);
        same_list("empty dicts", &[(), ()]);
        same_list(
            "mixed late",
            &[
                serde_json::json!({"l": ["a", "b"]}),
                serde_json::json!({"l": ["a", 1], "m": [{"k": 1}, "x"]}),
                serde_json::json!({}),
            ],
        );
        same_list(
            "not a dict",
            &[serde_json::json!({"a": 1}), serde_json::json!([1])],
        );
    }

    /// As deep as zvariant writes, and no deeper: a published entry
    /// nested on purpose is refused, not sent as bytes no client reads.
    #[test]
    fn nesting_is_refused_where_zvariant_refuses_it() {
        for depth in 0..40 {
            let mut deep = serde_json::json!({"leaf": 1});
            for _ in 0..depth {
                deep = serde_json::json!({ "d": deep });
            }
            same(&format!("deep{depth}"), &deep);
            let mut lists = serde_json::json!(["leaf", 1]);
            for _ in 0..depth {
                lists = serde_json::json!([lists, 2]);
            }
            same(&format!("lists{depth}"), &serde_json::json!({ "l": lists }));
        }
    }

    /// A map in the order given (not sorted as a `BTreeMap` is).
    struct InOrder(Vec<(String, serde_json::Value)>);

    impl Serialize for InOrder {
        fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
        }
    }

    /// Orders that need sorting, sorted the same way at every level.
    #[test]
    fn keys_are_in_byte_order_at_every_level() {
        let keys = [
            "b", "a", "B", "aa", "", "é", "z.y", "a.b", "ab", "\u{7f}", "a\u{1}",
        ];
        let inner: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .map(|k| ((*k).to_owned(), serde_json::json!(k.len())))
            .collect();
        let outer = InOrder(
            keys.iter()
                .map(|k| ((*k).to_owned(), serde_json::Value::Object(inner.clone())))
                .collect(),
        );
        same("sorted", &outer);
        same("nested", &BTreeMap::from([("m", &outer)]));
    }
}
