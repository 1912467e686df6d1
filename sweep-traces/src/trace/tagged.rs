//! Deserializing the `type`-tagged request entries without serde's generic buffering.
//!
//! `#[serde(tag = "type")]` buffers each whole entry (its `hash_ids` array of thousands of ids
//! included) into an intermediate tree before it knows the variant, which made that tree most of
//! the cost of reading a corpus. Here only the fields before `type` are buffered (`t`, in the
//! recordings); the rest goes straight into the variant's struct, which keeps its own
//! `deny_unknown_fields` and missing-field errors. Errors read as the derived ones did.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};

use super::{Entry, InnerRequest, Request, Subagent};

/// The variants a tag can name, and how to build each from the rest of the map.
trait Tagged: Sized {
    const EXPECTING: &'static str;
    const VARIANTS: &'static [&'static str];
    fn from_map<'de, M: MapAccess<'de>>(tag: &str, map: M) -> Result<Self, M::Error>;
}

fn request<'de, M: MapAccess<'de>>(map: M) -> Result<Request, M::Error> {
    serde::Deserialize::deserialize(MapAccessDeserializer::new(map))
}

impl Tagged for Entry {
    const EXPECTING: &'static str = "a request entry (an object with `type` \"n\", \"s\" or \"subagent\")";
    const VARIANTS: &'static [&'static str] = &["n", "s", "subagent"];
    fn from_map<'de, M: MapAccess<'de>>(tag: &str, map: M) -> Result<Self, M::Error> {
        match tag {
            "n" => request(map).map(Entry::NonStreaming),
            "s" => request(map).map(Entry::Streaming),
            "subagent" => <Subagent as serde::Deserialize>::deserialize(MapAccessDeserializer::new(map)).map(Entry::Subagent),
            other => Err(de::Error::unknown_variant(other, Self::VARIANTS)),
        }
    }
}

impl Tagged for InnerRequest {
    const EXPECTING: &'static str = "a subagent request (an object with `type` \"n\" or \"s\")";
    const VARIANTS: &'static [&'static str] = &["n", "s"];
    fn from_map<'de, M: MapAccess<'de>>(tag: &str, map: M) -> Result<Self, M::Error> {
        match tag {
            "n" => request(map).map(InnerRequest::NonStreaming),
            "s" => request(map).map(InnerRequest::Streaming),
            other => Err(de::Error::unknown_variant(other, Self::VARIANTS)),
        }
    }
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: Tagged> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut before: Vec<(String, serde_json::Value)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "type" {
                let tag: String = map.next_value()?;
                return T::from_map(&tag, Replay { before: before.into_iter(), pending: None, rest: map });
            }
            let value = map.next_value()?;
            before.push((key, value));
        }
        Err(de::Error::missing_field("type"))
    }
}

/// The entry's map with the `type` field taken out: first the fields read before it, then the rest.
struct Replay<A> {
    before: std::vec::IntoIter<(String, serde_json::Value)>,
    pending: Option<serde_json::Value>,
    rest: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Replay<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        if let Some((k, v)) = self.before.next() {
            self.pending = Some(v);
            let de: de::value::StringDeserializer<A::Error> = k.into_deserializer();
            return seed.deserialize(de).map(Some);
        }
        self.rest.next_key_seed(seed)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.pending.take() {
            Some(v) => seed.deserialize(v).map_err(de::Error::custom),
            None => self.rest.next_value_seed(seed),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TaggedVisitor(PhantomData))
    }
}

impl<'de> serde::Deserialize<'de> for InnerRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TaggedVisitor(PhantomData))
    }
}
