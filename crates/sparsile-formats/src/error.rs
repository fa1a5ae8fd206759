//! Errors about user-supplied sparse data. Each names the problem and where it is.

use thiserror::Error;

/// A problem with a format string, user arrays, a conversion or a file.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum FormatError {
    #[error("bad format `{text}`: {reason}")]
    BadFormatString { text: String, reason: String },

    #[error("format `{format}` cannot hold a tensor of order {ndim}")]
    UnsupportedOrder { format: String, ndim: usize },

    #[error(
        "coordinate {coordinate} of entry {entry} on axis {axis} is out of range (dimension {dim})"
    )]
    CoordinateOutOfRange {
        entry: usize,
        axis: usize,
        coordinate: i64,
        dim: usize,
    },

    #[error("{what} has length {found}, expected {expected}")]
    LengthMismatch {
        what: String,
        found: usize,
        expected: usize,
    },

    #[error("duplicate coordinate {coordinate:?} at entries {first} and {second}")]
    DuplicateCoordinate {
        coordinate: Vec<usize>,
        first: usize,
        second: usize,
    },

    #[error(
        "values of type {dtype} cannot be stored in a sparse tensor (need f16, bf16, f32 or f64)"
    )]
    UnsupportedDType { dtype: sparsile_ir::DType },

    #[error("dimension {dim} of size {size} does not fit the index type {index_type}")]
    ShapeTooLarge {
        dim: usize,
        size: usize,
        index_type: sparsile_ir::IndexType,
    },

    #[error("axis {axis} has {count} positions, which do not fit the index type {index_type}")]
    PositionsTooMany {
        axis: usize,
        count: usize,
        index_type: sparsile_ir::IndexType,
    },

    #[error("the shape {shape:?} has more elements than can be addressed")]
    ShapeOverflow { shape: Vec<usize> },

    #[error("row {row} has {length} entries, more than the ELL width {width}")]
    EllRowTooLong {
        row: usize,
        length: usize,
        width: usize,
    },

    #[error("block size {r}x{c} must be positive")]
    BlockSizeZero { r: usize, c: usize },

    #[error("block size {block} does not divide dimension {dim} of size {size}")]
    BlockSizeNotDividing {
        dim: usize,
        size: usize,
        block: usize,
    },

    #[error("indptr of axis {axis} has length {found}, expected {expected}")]
    IndptrLength {
        axis: usize,
        found: usize,
        expected: usize,
    },

    #[error("indptr of axis {axis} starts at {found}, expected 0")]
    IndptrStart { axis: usize, found: i64 },

    #[error(
        "indptr of axis {axis} ends at {found}, expected {expected} (the number of positions)"
    )]
    IndptrEnd {
        axis: usize,
        found: i64,
        expected: usize,
    },

    #[error("indptr of axis {axis} decreases at entry {entry}: {value} after {previous}")]
    IndptrDecreasing {
        axis: usize,
        entry: usize,
        value: i64,
        previous: i64,
    },

    #[error(
        "indptr and indices of axis {axis} have different index types ({indptr} and {indices})"
    )]
    MixedIndexTypes {
        axis: usize,
        indptr: sparsile_ir::IndexType,
        indices: sparsile_ir::IndexType,
    },

    #[error("index {value} at position {position} of axis {axis} is negative")]
    NegativeIndex {
        axis: usize,
        position: usize,
        value: i64,
    },

    #[error(
        "index {value} at position {position} of axis {axis} (under parent position {parent}) is out of range (dimension {dim})"
    )]
    IndexOutOfRange {
        axis: usize,
        parent: usize,
        position: usize,
        value: i64,
        dim: usize,
    },

    #[error("indices of axis {axis} under parent position {parent} are not sorted at position {position}")]
    UnsortedIndices {
        axis: usize,
        parent: usize,
        position: usize,
    },

    #[error("duplicate index {value} on axis {axis} under parent position {parent} at position {position}")]
    DuplicateIndex {
        axis: usize,
        parent: usize,
        position: usize,
        value: usize,
    },

    #[error("coordinate entries are not sorted at entry {entry}")]
    UnsortedEntries { entry: usize },

    #[error("padding on axis {axis} under parent position {parent} is followed by a stored coordinate at position {position}")]
    PaddingNotTrailing {
        axis: usize,
        parent: usize,
        position: usize,
    },

    #[error("axis {axis} under parent position {parent} has {count} positions, more than its length {length}")]
    RangeTooLong {
        axis: usize,
        parent: usize,
        count: usize,
        length: usize,
    },

    #[error("values have length {found}, expected {expected}")]
    ValuesLength { found: usize, expected: usize },

    #[error("expected {expected} coordinate arrays (one per dimension), found {found}")]
    CoordinateArrayCount { found: usize, expected: usize },

    #[error("format `{format}` has {expected} axes, found {found}")]
    AxisCount {
        format: String,
        found: usize,
        expected: usize,
    },

    #[error("axis {axis}: {field} is {found}, the layout of `{format}` needs {expected}")]
    AxisMismatch {
        format: String,
        axis: usize,
        field: &'static str,
        found: String,
        expected: String,
    },

    #[error("storing this tensor as {format} needs {elements} slots of {element_bytes} bytes ({gib:.1} GiB), more than can be allocated: choose another format")]
    StorageTooLarge {
        format: String,
        elements: usize,
        element_bytes: usize,
        gib: f64,
    },

    /// An allocation the input asked for that the machine cannot give (see
    /// [`crate::memory`]); `available_gib` is NaN where the system does not say.
    #[error("{what} needs {gib:.1} GiB, more than the memory available ({available_gib:.1} GiB)")]
    MemoryTooLarge {
        what: String,
        elements: u128,
        element_bytes: usize,
        gib: f64,
        available_gib: f64,
    },

    #[error("{0}")]
    Other(String),
}
