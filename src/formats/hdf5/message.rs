//! The numbers of object header messages (spec IV.A.2): the message
//! types slabfs reads and the flags a message carries.
//!
//! A leaf of the folder: [`super::meta`] parses the messages (and
//! re-exports these), and [`super::dense`] meets the attribute type and the
//! shared flag in the records of a dense attribute index, below the
//! message parser, whose shared messages it reads out of fractal heaps.
//! Kept apart so that neither imports the other both ways
//! (`tests/it/layers.rs`).

// Message types (spec IV.A.2.*).
pub const MSG_DATASPACE: u16 = 0x0001;
pub const MSG_LINK_INFO: u16 = 0x0002;
pub const MSG_DATATYPE: u16 = 0x0003;
pub const MSG_FILL_OLD: u16 = 0x0004;
pub const MSG_FILL: u16 = 0x0005;
pub const MSG_LINK: u16 = 0x0006;
pub const MSG_LAYOUT: u16 = 0x0008;
pub const MSG_FILTERS: u16 = 0x000B;
pub const MSG_ATTRIBUTE: u16 = 0x000C;
pub const MSG_CONTINUATION: u16 = 0x0010;
pub const MSG_SYMBOL_TABLE: u16 = 0x0011;
pub const MSG_ATTRIBUTE_INFO: u16 = 0x0015;

/// Header message flag: the message is stored in the shared-message heap
/// or another object's header, not here ([`super::meta::shared_message`]).
pub const MSG_FLAG_SHARED: u8 = 0x02;
/// Header message flag (bit 7, `H5O_MSG_FLAG_FAIL_IF_UNKNOWN_ALWAYS`): a
/// reader that does not know the message's type must not open the object
/// (`meta::check_known`). Bit 3 (`..._AND_OPEN_FOR_WRITE`) asks the same of
/// writers only: a read-only reader ignores it, as HDF5 does when the file
/// is opened read-only.
pub const MSG_FLAG_FAIL_IF_UNKNOWN: u8 = 0x80;
