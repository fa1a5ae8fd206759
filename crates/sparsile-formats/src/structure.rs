//! The structure of a sparse tensor: format, logical shape, axis storage.

use crate::{AxisStorage, Format, Pos};

/// Format, logical shape and the storage of each axis, in storage order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structure<'a> {
    pub format: Format,
    /// The logical shape of the tensor.
    pub shape: Vec<usize>,
    /// The axes in storage order (parents before children).
    pub axes: Vec<AxisStorage<'a>>,
}

impl<'a> Structure<'a> {
    /// Whether axis `i` is a leaf: no later axis has it as parent.
    pub fn is_leaf(&self, i: usize) -> bool {
        !self.axes[i + 1..].iter().any(|a| a.parent == Some(i))
    }

    /// The number of positions of the deepest axis in the chain rooted at `root`.
    fn tree_size(&self, root: usize) -> usize {
        let mut cur = root;
        while let Some(child) =
            (cur + 1..self.axes.len()).find(|&j| self.axes[j].parent == Some(cur))
        {
            cur = child;
        }
        self.axes[cur].npos
    }

    /// The offset in the value array of the element with the given position on every
    /// axis (positions of axes with parents are global). Follows the flattening rule:
    /// the sum over leaf axes of position × stride, where a parentless axis multiplies
    /// the stride by the size of the chain it roots.
    pub fn value_offset(&self, positions: &[Pos]) -> usize {
        debug_assert_eq!(positions.len(), self.axes.len());
        let mut stride = 1usize;
        let mut offset = 0usize;
        for i in (0..self.axes.len()).rev() {
            if self.is_leaf(i) {
                offset += positions[i].0 * stride;
            }
            if self.axes[i].parent.is_none() {
                stride *= self.tree_size(i);
            }
        }
        offset
    }

    /// The number of stored values (including padding).
    pub fn nnz_stored(&self) -> usize {
        (0..self.axes.len())
            .filter(|&i| self.axes[i].parent.is_none())
            .map(|i| self.tree_size(i))
            .product()
    }

    /// A borrowed view.
    pub fn view(&self) -> Structure<'_> {
        Structure {
            format: self.format.clone(),
            shape: self.shape.clone(),
            axes: self.axes.iter().map(|a| a.view()).collect(),
        }
    }

    /// An owned copy.
    pub fn into_owned(self) -> Structure<'static> {
        Structure {
            format: self.format,
            shape: self.shape,
            axes: self.axes.into_iter().map(|a| a.into_owned()).collect(),
        }
    }
}
