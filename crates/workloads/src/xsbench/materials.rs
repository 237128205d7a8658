//! XSBench's material table (`Materials.c`) and `pick_mat`'s material distribution
//! (`Simulation.c`).

/// Material names, index = material id (comments of `Materials.c` / `pick_mat`).
pub const MATERIAL_NAMES: [&str; 12] = [
    "fuel",
    "cladding",
    "cold borated water",
    "hot borated water",
    "RPV",
    "lower radial reflector",
    "top reflector / plate",
    "bottom plate",
    "bottom nozzle",
    "top nozzle",
    "top of FA's",
    "bottom FA's",
];

/// `pick_mat`'s `dist[]` (volume fractions).
const PICK_MAT_DIST: [f64; 12] = [
    0.140, 0.052, 0.275, 0.134, 0.154, 0.064, 0.066, 0.055, 0.008, 0.015, 0.025, 0.013,
];

/// Cumulative thresholds exactly as the real `pick_mat` loop builds them: for material `i` the
/// running sum is `dist[i] + dist[i-1] + ... + dist[1]` (summed in that order, `j > 0`, so
/// `dist[0]` is never added), `i` is returned at the first `roll < running`, and fuel (0) is the
/// fall-through `return 0`. Hence P(fuel) = 1 - 0.861 = 0.139 and P(i) = dist[i] for i >= 1.
///
/// (One stored revision of `Simulation.c` with an `FP_PRECISION` type has a precomputed CDF
/// starting at `dist[0] = 0.140`, which gives fuel 0.140 and material 11 0.012; it does not match
/// the `double`-only header of the same directory, so the running-sum version is used here.)
pub(super) fn pick_mat_thresholds() -> [f64; 12] {
    let mut t = [0.0; 12];
    for (i, ti) in t.iter_mut().enumerate() {
        let mut running = 0.0;
        let mut j = i;
        while j > 0 {
            running += PICK_MAT_DIST[j];
            j -= 1;
        }
        *ti = running;
    }
    t
}

/// Probability with which `pick_mat` returns each material.
pub fn pick_mat_probabilities() -> [f64; 12] {
    let t = pick_mat_thresholds();
    let mut p = [0.0; 12];
    let mut covered = 0.0;
    for i in 1..12 {
        p[i] = (t[i] - covered).max(0.0);
        covered = covered.max(t[i]);
    }
    p[0] = 1.0 - covered;
    p
}

/// `load_num_nucs(n_isotopes)`: fuel has 34 nuclides in H-M small (`n_isotopes == 68`), 321
/// otherwise.
pub fn num_nucs(n_isotopes: u64) -> [u32; 12] {
    let fuel = if n_isotopes == 68 { 34 } else { 321 };
    [fuel, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9]
}

/// `load_mats`: the nuclide ids of every material (row `m` has `num_nucs[m]` entries).
pub fn material_nuclides(n_isotopes: u64) -> [Vec<u32>; 12] {
    const FUEL_SMALL: [u32; 34] = [
        58, 59, 60, 61, 40, 42, 43, 44, 45, 46, 1, 2, 3, 7, 8, 9, 10, 29, 57, 47, 48, 0, 62, 15,
        33, 34, 52, 53, 54, 55, 56, 18, 23, 41,
    ];
    const CLADDING: [u32; 5] = [63, 64, 65, 66, 67];
    const WATER: [u32; 4] = [24, 41, 4, 5];
    const RPV: [u32; 27] = [
        19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 27, 28, 29, 30, 31, 32, 26, 49, 50, 51, 11, 12, 13,
        14, 6, 16, 17,
    ];
    const REFLECTOR: [u32; 21] = [
        24, 41, 4, 5, 19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 49, 50, 51, 11, 12, 13, 14,
    ];
    const FA_END: [u32; 9] = [24, 41, 4, 5, 63, 64, 65, 66, 67];

    let mut fuel = FUEL_SMALL.to_vec();
    if n_isotopes != 68 {
        // H-M large adds nuclides 68..354 to fuel only (321 in total).
        fuel.extend((0..321 - 34).map(|i| 68 + i));
    }
    [
        fuel,
        CLADDING.to_vec(),
        WATER.to_vec(),
        WATER.to_vec(),
        RPV.to_vec(),
        REFLECTOR.to_vec(),
        REFLECTOR.to_vec(),
        REFLECTOR.to_vec(),
        REFLECTOR.to_vec(),
        REFLECTOR.to_vec(),
        FA_END.to_vec(),
        FA_END.to_vec(),
    ]
}
