//! Every format round-trips a real graph matrix (Cora, bundled in `data/`).

use std::path::PathBuf;

use sparsile_formats::mtx::{self, MtxReadOptions};
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::DType;

#[test]
fn cora_round_trips_through_every_format() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/cora.mtx");
    let coo = mtx::read_path(&path, &MtxReadOptions::default())
        .unwrap()
        .into_coo();
    assert_eq!(coo.shape, vec![2708, 2708]);
    for f in [
        "dense",
        "csr",
        "csc",
        "coo",
        "dcsr",
        "bsr:4x4",
        "dbsr:3x2",
        "ell",
        "dia",
        "csf",
        "srbcrs:8x4",
        "ragged",
    ] {
        let format: Format = f.parse().unwrap();
        let t = SparseTensor::from_coo_with(&coo, &format, DType::F32).unwrap();
        let again = SparseTensor::from_parts(
            format,
            &coo.shape,
            t.structure.axes.clone(),
            t.values.clone(),
        )
        .unwrap();
        assert_eq!(again.to_coo().unwrap(), coo, "{f}");
        assert_eq!(
            t.convert(&Format::Csr).unwrap().to_coo().unwrap(),
            coo,
            "{f}"
        );
    }
}
