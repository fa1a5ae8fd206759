//! The canonical coordinate form: every conversion goes through it.

use crate::FormatError;

/// A tensor as a list of (coordinate tuple, value) entries in f64.
///
/// `coords` holds `nnz * ndim` coordinates, entry-major. A *canonical* `CooTensor` is
/// sorted lexicographically with no duplicates; constructors say whether they
/// canonicalise.
#[derive(Debug, Clone, PartialEq)]
pub struct CooTensor {
    pub shape: Vec<usize>,
    pub coords: Vec<usize>,
    pub values: Vec<f64>,
}

impl CooTensor {
    /// An empty tensor of the given shape.
    pub fn empty(shape: Vec<usize>) -> CooTensor {
        CooTensor {
            shape,
            coords: Vec::new(),
            values: Vec::new(),
        }
    }

    /// A canonical 2-D tensor from `(row, col, value)` triplets, rejecting out-of-range
    /// and duplicate coordinates.
    pub fn from_triplets(
        shape: Vec<usize>,
        triplets: &[(usize, usize, f64)],
    ) -> Result<CooTensor, FormatError> {
        if shape.len() != 2 {
            return Err(FormatError::Other(format!(
                "from_triplets needs a 2-D shape, found order {}",
                shape.len()
            )));
        }
        let mut coords = Vec::with_capacity(triplets.len() * 2);
        let mut values = Vec::with_capacity(triplets.len());
        for &(i, j, v) in triplets {
            coords.push(i);
            coords.push(j);
            values.push(v);
        }
        let mut coo = CooTensor {
            shape,
            coords,
            values,
        };
        coo.check_ranges()?;
        coo.sort_and_reject_duplicates()?;
        Ok(coo)
    }

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The coordinate tuple of entry `e`.
    pub fn coord(&self, e: usize) -> &[usize] {
        let d = self.ndim();
        &self.coords[e * d..(e + 1) * d]
    }

    /// Checks that every coordinate lies inside the shape.
    pub fn check_ranges(&self) -> Result<(), FormatError> {
        let d = self.ndim();
        if self.coords.len() != self.values.len() * d {
            return Err(FormatError::LengthMismatch {
                what: "coordinate list".into(),
                found: self.coords.len(),
                expected: self.values.len() * d,
            });
        }
        for e in 0..self.nnz() {
            for (axis, (&c, &dim)) in self.coord(e).iter().zip(&self.shape).enumerate() {
                if c >= dim {
                    return Err(FormatError::CoordinateOutOfRange {
                        entry: e,
                        axis,
                        coordinate: c as i64,
                        dim,
                    });
                }
            }
        }
        Ok(())
    }

    /// The permutation sorting entries lexicographically (stable).
    fn sorted_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.nnz()).collect();
        order.sort_by(|&a, &b| self.coord(a).cmp(self.coord(b)));
        order
    }

    fn permute(&mut self, order: &[usize]) {
        let d = self.ndim();
        let mut coords = Vec::with_capacity(self.coords.len());
        let mut values = Vec::with_capacity(self.values.len());
        for &e in order {
            coords.extend_from_slice(&self.coords[e * d..(e + 1) * d]);
            values.push(self.values[e]);
        }
        self.coords = coords;
        self.values = values;
    }

    /// Sorts entries; duplicate coordinates are an error naming both entries (by their
    /// index in the input order).
    pub fn sort_and_reject_duplicates(&mut self) -> Result<(), FormatError> {
        let order = self.sorted_order();
        for w in order.windows(2) {
            if self.coord(w[0]) == self.coord(w[1]) {
                return Err(FormatError::DuplicateCoordinate {
                    coordinate: self.coord(w[0]).to_vec(),
                    first: w[0].min(w[1]),
                    second: w[0].max(w[1]),
                });
            }
        }
        self.permute(&order);
        Ok(())
    }

    /// Sorts entries and sums the values of duplicate coordinates.
    pub fn sort_and_sum_duplicates(&mut self) {
        let order = self.sorted_order();
        self.permute(&order);
        let d = self.ndim();
        let mut coords: Vec<usize> = Vec::with_capacity(self.coords.len());
        let mut values: Vec<f64> = Vec::with_capacity(self.values.len());
        for e in 0..self.nnz() {
            let c = &self.coords[e * d..(e + 1) * d];
            if !values.is_empty() && &coords[coords.len() - d..] == c {
                *values.last_mut().unwrap() += self.values[e];
            } else {
                coords.extend_from_slice(c);
                values.push(self.values[e]);
            }
        }
        self.coords = coords;
        self.values = values;
    }
}
