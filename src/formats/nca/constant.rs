//! A sub-array that is one value everywhere: a CF-1.13 `unique_values`
//! fragment. Nothing is stored; reads fill the box.

use std::path::Path;

use crate::dtype::DataType;
use crate::engine::array::{ArrayMeta, ArraySource};
use crate::engine::index::Region;
use crate::error::Result;

#[derive(Debug)]
pub struct Constant {
    meta: ArrayMeta,
}

impl Constant {
    /// `value` is one element of `dtype`, native byte order.
    pub fn new(file: &Path, shape: Vec<u64>, dtype: DataType, value: Vec<u8>) -> Result<Constant> {
        let source = format!("{} (unique value)", file.display());
        Ok(Constant {
            meta: ArrayMeta::new(source, shape, dtype, value)?,
        })
    }
}

impl ArraySource for Constant {
    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    fn read_region(&self, _region: &Region, out: &mut [u8]) -> Result<()> {
        let v = &self.meta.fill_value;
        for c in out.chunks_exact_mut(v.len()) {
            c.copy_from_slice(v);
        }
        Ok(())
    }
}
