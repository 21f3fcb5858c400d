//! One variable of a joinExisting or joinNew aggregation: the members'
//! variables of that name, one after another along the outer dimension.
//!
//! joinExisting: member `k` covers rows `[start_k, start_k + n_k)` of the
//! variable's first dimension, `n_k` its length along it (the NcML's
//! `ncoords`, or read from the member's header at load). joinNew: member
//! `k` is row `k` of a new first dimension, its variable the rest. Either
//! way the first dimension is cut into one tile per member, the others
//! are whole, and a read is projected over that tiling with the engine's
//! piece loop ([`read_pieces`]): each piece reads the member's variable
//! straight into its box of the reply, the pieces of one read in
//! parallel.
//!
//! A member is opened on the first read that touches it (unless the load
//! needed its length) and checked then: the same dtype and the same
//! shape but for the joined dimension. A member that cannot be opened,
//! lacks the variable or does not fit fails the reads that touch it,
//! naming the member; the failure is not kept, so a fixed file reads on
//! the next try.

use std::sync::Arc;

use super::error::NcmlError;
use super::members::{Member, members_stamp};
use crate::engine::array::{ArrayMeta, ArraySource, ChangeStamp};
use crate::engine::index::Region;
use crate::engine::index::disjoint::DisjointView;
use crate::engine::index::tiling::{DimTiling, Piece};
use crate::engine::pieces::{PieceSource, read_into, read_pieces};
use crate::error::Result;

/// One member's share of the joined variable.
pub struct Part {
    pub member: Arc<Member>,
    /// Its length along the joined dimension (1 for joinNew).
    pub len: u64,
}

pub struct Joined {
    meta: ArrayMeta,
    /// The variable's name in every member.
    var: String,
    tiling: Vec<DimTiling>,
    parts: Vec<Part>,
    /// joinNew: the first dimension is new, the members' variables have
    /// one dimension fewer.
    new_axis: bool,
}

impl std::fmt::Debug for Joined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joined")
            .field("var", &self.var)
            .field("shape", &self.meta.shape)
            .field("members", &self.parts.len())
            .finish()
    }
}

impl Joined {
    /// `meta` is the joined variable's (its first dimension the sum of
    /// the parts' lengths, checked), `var` its name in the members.
    pub fn new(meta: ArrayMeta, var: String, parts: Vec<Part>, new_axis: bool) -> Result<Joined> {
        let lens: Vec<u64> = parts.iter().map(|p| p.len).collect();
        let total: u64 = lens.iter().sum();
        if meta.shape.first() != Some(&total) {
            return Err(crate::Error::metadata(
                meta.source.clone(),
                format!("members of {total} rows for a shape of {:?}", meta.shape),
            ));
        }
        // Members of no rows along the dimension hold nothing of it.
        let parts: Vec<Part> = parts.into_iter().filter(|p| p.len > 0).collect();
        let lens: Vec<u64> = parts.iter().map(|p| p.len).collect();
        let mut tiling = vec![if lens.is_empty() {
            DimTiling::Regular(1)
        } else {
            DimTiling::from_lengths(&lens)
                .map_err(|e| crate::Error::metadata(meta.source.clone(), e))?
        }];
        tiling.extend(
            meta.shape[1..]
                .iter()
                .map(|&n| DimTiling::Regular(n.max(1))),
        );
        Ok(Joined {
            meta,
            var,
            tiling,
            parts,
            new_axis,
        })
    }

    /// Check every member already open against the variable (its dtype,
    /// its shape): an error names the first that does not fit. The load
    /// calls it, so an aggregation of members that do not fit is refused
    /// rather than failing reads.
    pub fn check_opened(&self) -> Result<()> {
        for p in &self.parts {
            if p.member.opened().is_some() {
                self.member_array(p)?;
            }
        }
        Ok(())
    }

    /// The shape a member's variable must have: the joined one with the
    /// member's rows (joinExisting) or without the new dimension.
    fn member_shape(&self, part: &Part) -> Vec<u64> {
        if self.new_axis {
            self.meta.shape[1..].to_vec()
        } else {
            let mut s = self.meta.shape.clone();
            s[0] = part.len;
            s
        }
    }

    fn member_array(&self, part: &Part) -> Result<Arc<dyn ArraySource>> {
        let view = part.member.view()?;
        let label = part.member.label();
        let err = |d: String| NcmlError::member(label.clone(), d).at(self.meta.source.clone());
        let v = view
            .var(&self.var)
            .ok_or_else(|| err(format!("has no variable {}", self.var)))?;
        let want = self.member_shape(part);
        if v.shape() != want.as_slice() || *v.dtype() != self.meta.dtype {
            return Err(err(format!(
                "variable {} is {} {:?}; the aggregation needs {} {want:?}",
                self.var,
                v.dtype(),
                v.shape(),
                self.meta.dtype
            )));
        }
        Ok(v.array.clone())
    }
}

impl PieceSource for Joined {
    type Fetched = ();

    fn tiling(&self) -> &[DimTiling] {
        &self.tiling
    }

    fn item_size(&self) -> usize {
        self.meta.item_size()
    }

    fn read_piece(
        &self,
        piece: &Piece,
        mut view: DisjointView<'_>,
        _many: bool,
        _fetched: Option<()>,
    ) -> Result<()> {
        let part = &self.parts[piece.tile[0] as usize];
        let array = self.member_array(part)?;
        let mut start = piece.tile_start.clone();
        let mut count = piece.count.clone();
        // The other dimensions are one tile each: in-tile is absolute.
        if self.new_axis {
            start.remove(0);
            count.remove(0);
        }
        read_into(array.as_ref(), &Region { start, count }, &mut view)
    }
}

impl ArraySource for Joined {
    fn meta(&self) -> &ArrayMeta {
        &self.meta
    }

    /// A hash of every member's variable's stamp: a member rewritten or
    /// replaced changes it (the refresh re-opens the NcML file and
    /// compares; the entry's stamp is `Reopen`). Unknown while a member
    /// is not open, or cannot tell. No cache of its own.
    fn change_stamp(&self) -> ChangeStamp {
        members_stamp(self.parts.iter().map(|p| &p.member), &self.var)
    }

    fn read_region(&self, region: &Region, out: &mut [u8]) -> Result<()> {
        if region.num_elements() == 0 {
            return Ok(());
        }
        read_pieces(self, region, out)
    }
}
