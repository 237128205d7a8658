//! Loading, `--set`, errors and validation of scenario configs.

use super::*;

const BASE: &str = r#"
[machine]
cpus = 2
[[machine.nodes]]
capacity_mib = 64
read_latency_ns = 90
write_latency_ns = 90
cpus = "0-1"
[workload]
type = "none"
"#;

#[test]
fn parses_defaults_and_cpu_lists() {
    let c = Config::from_str_with(BASE, "t.toml", None, &[]).unwrap();
    assert_eq!(c.vm.watermark_scale_factor, 10);
    assert_eq!(c.machine.tlb.stlb_entries, 1536);
    assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
    assert!(parse_cpu_list("3-1").is_err());
}

#[test]
fn set_overrides_any_key() {
    let sets = [
        "vm.watermark_scale_factor=200".to_string(),
        "machine.nodes.0.capacity_mib=1".to_string(),
    ];
    // A numeric segment indexes an array; the new value is then validated like any other.
    let e = Config::from_str_with(BASE, "t.toml", None, &sets[1..]).unwrap_err();
    assert!(
        e.to_string().contains("machine.nodes[0].capacity_mib"),
        "{e}"
    );
    let c = Config::from_str_with(
        BASE,
        "t.toml",
        None,
        &["machine.nodes.0.capacity_mib=128".into()],
    )
    .unwrap();
    assert_eq!(c.machine.nodes[0].capacity_mib, 128);
    let e = Config::from_str_with(BASE, "t.toml", None, &["machine.nodes.3.cpus=\"0\"".into()])
        .unwrap_err();
    assert!(e.to_string().contains("past the end"), "{e}");
    let c = Config::from_str_with(BASE, "t.toml", None, &sets[..1]).unwrap();
    assert_eq!(c.vm.watermark_scale_factor, 200);
}

#[test]
fn unknown_keys_and_bad_types_name_the_key_and_file() {
    let e = Config::from_str_with(BASE, "s.toml", None, &["vm.watermark_scale_factr=3".into()])
        .unwrap_err();
    assert!(e.to_string().starts_with("s.toml: key `vm"), "{e}");
    assert!(e.to_string().contains("watermark_scale_factr"), "{e}");
    let e =
        Config::from_str_with(BASE, "s.toml", None, &["machine.cpus=\"many\"".into()]).unwrap_err();
    assert!(e.to_string().contains("machine.cpus"), "{e}");
}

#[test]
fn impossible_machines_are_rejected_by_key() {
    let cases = [
        ("machine.cpus=3", "machine.nodes"),
        ("machine.tlb.dtlb_entries=60", "machine.tlb.dtlb_entries"),
        (
            "vm.percpu_pagelist_high_fraction=4",
            "vm.percpu_pagelist_high_fraction",
        ),
        ("machine.cpu_ghz=0", "machine.cpu_ghz"),
    ];
    for (set, key) in cases {
        let e = Config::from_str_with(BASE, "s.toml", None, &[set.into()]).unwrap_err();
        assert!(e.to_string().contains(key), "{set}: {e}");
    }
    let two_owners = BASE.replace("cpus = \"0-1\"", "cpus = \"0-2\"");
    let e = Config::from_str_with(&two_owners, "s.toml", None, &[]).unwrap_err();
    assert!(e.to_string().contains("machine.nodes[0].cpus"), "{e}");
}

fn load(text: &str, sets: &[&str]) -> Result<Config, ConfigError> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::from_str_with(text, "s.toml", None, &sets)
}

#[test]
fn defaults_come_from_the_declarations_and_lie_in_their_ranges() {
    let c = load(BASE, &[]).unwrap();
    assert_eq!(c.kernel.sched_base_slice_ns, 750_000);
    assert_eq!(c.kernel.numa_balancing_promote_rate_limit_mbps, 65536);
    assert_eq!(c.x86.tlb_single_page_flush_ceiling, 33);
    assert_eq!(c.machine.arch, Arch::X86);
    assert_eq!(c.machine.nodes[0].read_bandwidth_gbps, 100.0);
    assert!(c.sim.check.is_none() && c.machine.nodes[0].adistance.is_none());
    for (key, knob) in all_knobs() {
        if knob.required {
            continue;
        }
        let ranged = match key.split('.').next() {
            Some("vm") => VmSysctl::default().check_ranges(),
            Some("kernel") => KernelSysctl::default().check_ranges(),
            Some("x86") => X86Knobs::default().check_ranges(),
            Some("sim") => SimConfig::default().check_ranges(),
            _ => Ok(()),
        };
        assert!(
            ranged.is_ok(),
            "{key}: default outside its range: {ranged:?}"
        );
    }
    let wsf = VmSysctl::KNOBS
        .iter()
        .find(|k| k.key == "watermark_scale_factor")
        .unwrap();
    assert_eq!(wsf.default_text(), "10");
    assert_eq!(wsf.range.to_string(), "1..=3000");
}

#[test]
fn declared_ranges_are_the_kernels() {
    let refused = [
        "vm.watermark_scale_factor=0",
        "vm.watermark_scale_factor=3001",
        "vm.percpu_pagelist_high_fraction=7",
        "vm.swappiness=201",
        "vm.demote_scale_factor=10001",
        "kernel.numa_balancing=5",
        "kernel.numa_balancing_scan_size_mb=0",
        "machine.cpus=257",
        "machine.mlp=0.5",
        "sim.quantum_ns=0",
        "sim.max_seconds=-1",
        "machine.nodes.0.read_latency_ns=0",
        "machine.tlb.nr_dyn_asids=0",
    ];
    for set in refused {
        // TPP's own knobs are only accepted under the TPP policy.
        let tpp = set.starts_with("vm.demote_scale_factor");
        let sets: &[&str] = if tpp {
            &["kernel.tiering_policy=\"tpp\"", set]
        } else {
            &[set]
        };
        let e = load(BASE, sets).unwrap_err();
        let key = super::set_key(set.split_once('=').unwrap().0);
        assert_eq!(e.key_name(), Some(key.as_str()), "{set}: {e}");
        assert!(e.to_string().contains("out of range"), "{set}: {e}");
    }
    let accepted = [
        "vm.percpu_pagelist_high_fraction=8",
        "vm.swappiness=200",
        "kernel.numa_balancing=4",
        "kernel.numa_balancing_hot_threshold_ms=0",
        "x86.tlb_single_page_flush_ceiling=0",
        "vm.watermark_scale_factor=3000",
    ];
    for set in accepted {
        let tpp = set.starts_with("vm.demote_scale_factor");
        let sets: &[&str] = if tpp {
            &["kernel.tiering_policy=\"tpp\"", set]
        } else {
            &[set]
        };
        assert!(load(BASE, sets).is_ok(), "{set}");
    }
}

#[test]
fn a_tiering_policy_brings_its_defaults_and_owns_its_knobs() {
    let linux = load(BASE, &[]).unwrap();
    assert_eq!(linux.kernel.tiering_policy, "linux");
    assert_eq!(linux.vm.demote_scale_factor, 0);
    assert!(!linux.kernel.numa_balancing_active_lru_promotion);
    let tpp = load(BASE, &["kernel.tiering_policy=\"tpp\""]).unwrap();
    assert_eq!(tpp.vm.demote_scale_factor, 200);
    assert!(tpp.kernel.numa_balancing_active_lru_promotion);
    // An explicit value wins over the policy's default.
    let ablated = load(
        BASE,
        &["kernel.tiering_policy=\"tpp\"", "vm.demote_scale_factor=0"],
    )
    .unwrap();
    assert_eq!(ablated.vm.demote_scale_factor, 0);
    assert!(ablated.kernel.numa_balancing_active_lru_promotion);
    let e = load(BASE, &["vm.demote_scale_factor=200"]).unwrap_err();
    assert_eq!(e.key_name(), Some("vm.demote_scale_factor"), "{e}");
    assert!(e.to_string().contains("`tpp` tiering policy"), "{e}");
    let e = load(BASE, &["kernel.tiering_policy=\"memtis\""]).unwrap_err();
    assert!(e.to_string().contains("registered: linux, tpp"), "{e}");
}

#[test]
fn machine_arch_accepts_x86_and_arm64_and_refuses_migrc_on_arm64() {
    for (arch, want) in [
        ("x86", Arch::X86),
        ("x86_64", Arch::X86),
        ("arm64", Arch::Arm64),
        ("aarch64", Arch::Arm64),
    ] {
        let c = load(BASE, &[&format!("machine.arch=\"{arch}\"")]).unwrap();
        assert_eq!(c.machine.arch, want);
    }
    let text = BASE.replace("cpus = 2", "cpus = 2\narch = \"arm64\"");
    let e = load(&text, &["kernel.migrc=on"]).unwrap_err();
    assert_eq!(e.key_name(), Some("kernel.migrc"), "{e}");
    assert!(e.to_string().contains("x86 only"), "{e}");
    let e = load(BASE, &["machine.arch=\"riscv\""]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Set { key: Some(k), .. } if k == "machine.arch"),
        "{e}"
    );
    assert!(e.to_string().contains("accepted: \"x86\""), "{e}");
}

#[test]
fn set_errors_blame_the_set_and_file_errors_the_file() {
    let e = load(BASE, &["vm.watermark_scale_factor=0"]).unwrap_err();
    assert_eq!(
        e,
        ConfigError::Set {
            file: "s.toml".into(),
            assignment: "vm.watermark_scale_factor=0".into(),
            key: Some("vm.watermark_scale_factor".into()),
            msg: "0 is out of range (1..=3000)".into(),
        }
    );
    let text = format!("{BASE}[vm]\nwatermark_scale_factor = 0\n");
    let e = load(&text, &[]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Key { key, .. } if key == "vm.watermark_scale_factor"),
        "{e}"
    );
    // A set that replaces a whole table owns the errors inside it.
    let e = load(BASE, &["machine.nodes=[{ capacity_mib = 1, read_latency_ns = 1, write_latency_ns = 1, cpus = \"0-1\" }]"]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Set { key: Some(k), .. } if k == "machine.nodes[0].capacity_mib"),
        "{e}"
    );
    let e = load(BASE, &["novalue"]).unwrap_err();
    assert_eq!(e.to_string(), "s.toml: --set novalue: expected key=value");
}

#[test]
fn syntax_unknown_key_missing_key_and_io_errors_are_typed() {
    let e = load("[machine]\ncpus = = 3\n", &[]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Syntax { line: Some(2), .. }),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("s.toml: line 2: "), "{e}");
    let e = load(&format!("{BASE}[vm]\nswapiness = 3\n"), &[]).unwrap_err();
    match &e {
        ConfigError::UnknownKey { key, expected, .. } => {
            assert_eq!(key, "vm.swapiness");
            assert!(expected.iter().any(|k| k == "swappiness"), "{expected:?}");
        }
        other => panic!("{other:?}"),
    }
    let e = load(&BASE.replace("cpus = 2\n", ""), &[]).unwrap_err();
    assert_eq!(e.to_string(), "s.toml: key `machine.cpus`: missing");
    let e = load(&BASE.replace("capacity_mib = 64\n", ""), &[]).unwrap_err();
    assert_eq!(e.key_name(), Some("machine.nodes[0].capacity_mib"), "{e}");
    let e = Config::load(Path::new("no/such.toml"), &[]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Io { file, .. } if file == "no/such.toml"),
        "{e:?}"
    );
    for e in [e, load("[machine]\ncpus = = 3\n", &[]).unwrap_err()] {
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

#[test]
fn renamed_and_on_off_knobs_keep_working() {
    let c = load(
        BASE,
        &[
            "kernel.numa_balancing_promote_rate_limit_MBps=100",
            "kernel.migrc=on",
            "kernel.tiering_policy=\"tpp\"",
            "kernel.numa_balancing_active_lru_promotion=\"off\"",
        ],
    )
    .unwrap();
    assert_eq!(c.kernel.numa_balancing_promote_rate_limit_mbps, 100);
    assert!(c.kernel.migrc && !c.kernel.numa_balancing_active_lru_promotion);
    let e = load(BASE, &["kernel.numa_balancing_promote_rate_limit_mbps=1"]).unwrap_err();
    assert!(matches!(&e, ConfigError::Set { key: Some(_), .. }), "{e}");
    let keys: Vec<String> = all_knobs().into_iter().map(|(k, _)| k).collect();
    for key in [
        "kernel.numa_balancing_promote_rate_limit_MBps",
        "machine.nodes[].cpus",
        "machine.tlb.nr_dyn_asids",
        "machine.arch",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} not listed");
    }
    assert!(
        !keys.iter().any(|k| k == "machine.tlb"),
        "sub-tables are not knobs"
    );
}

#[test]
fn boot_pcp_lists_fit_the_cpus_and_the_node() {
    // 64 MiB: 16,384 pages, of which 12,288 may start on the lists (16 MiB stay free).
    let ok = ["machine.nodes.0.boot_pcp_count=[6000, 6288]"];
    assert!(load(BASE, &ok).is_ok());
    let refused = [
        (
            "machine.nodes.0.boot_pcp_count=[6000, 6289]",
            "boot_pcp_count",
            "16 MiB",
        ),
        (
            "machine.nodes.0.boot_pcp_count=[1, 2, 3]",
            "boot_pcp_count",
            "3 entries for 2 CPUs",
        ),
        (
            "machine.nodes.0.boot_pcp_high=[1, 2, 3]",
            "boot_pcp_high",
            "3 entries for 2 CPUs",
        ),
    ];
    for (set, key, why) in refused {
        let e = load(BASE, &[set]).unwrap_err();
        assert_eq!(
            e.key_name(),
            Some(format!("machine.nodes[0].{key}").as_str()),
            "{set}: {e}"
        );
        assert!(e.to_string().contains(why), "{set}: {e}");
    }
}

#[test]
fn cpu_lists_are_bounded_before_they_are_expanded() {
    let e = parse_cpu_list("0-4294967295").unwrap_err();
    assert!(e.contains("4294967295") && e.contains("0..=255"), "{e}");
    assert!(parse_cpu_list("0-255").is_ok());
    assert!(parse_cpu_list("256").is_err());
    // Repeats cannot grow the list without end either.
    assert!(parse_cpu_list(&"0-255,".repeat(10)).is_err());
}

#[test]
fn set_keys_are_limited_in_depth() {
    let deep = format!("{}b=1", "a.".repeat(MAX_SET_DEPTH));
    let e = load(BASE, &[deep.as_str()]).unwrap_err();
    assert!(matches!(e, ConfigError::Set { .. }), "{e}");
    assert!(e.to_string().contains("at most 16"), "{e}");
    let ok = format!("{}b=1", "a.".repeat(MAX_SET_DEPTH - 1));
    // A key that deep is merely unknown, reported as such.
    let e = load(BASE, &[ok.as_str()]).unwrap_err();
    assert!(!e.to_string().contains("at most 16"), "{e}");
}

#[test]
fn reals_refuse_nan_infinity_and_nonsense() {
    for set in [
        "machine.nodes.0.read_latency_ns=1e300",
        "machine.nodes.0.write_bandwidth_gbps=nan",
        "machine.mlp=inf",
        "sim.timeline_interval_ms=0.0001",
        "cost.migrate_copy_gbps=0",
        "cost.zram_compress_ns=-1",
    ] {
        let e = load(BASE, &[set]).unwrap_err();
        let key = super::set_key(set.split_once('=').unwrap().0);
        assert_eq!(e.key_name(), Some(key.as_str()), "{set}: {e}");
        assert!(e.to_string().contains("(from --set"), "{set}: {e}");
    }
    // 1e300 prints as 1e300, not as 301 digits.
    let e = load(BASE, &["machine.nodes.0.read_latency_ns=1e300"]).unwrap_err();
    assert!(e.to_string().contains("1e300 is out of range"), "{e}");
}

#[test]
fn min_free_kbytes_must_leave_the_machine_a_page() {
    // BASE has 64 MiB = 65536 KiB.
    let e = load(BASE, &["vm.min_free_kbytes=65536"]).unwrap_err();
    assert_eq!(e.key_name(), Some("vm.min_free_kbytes"), "{e}");
    assert!(load(BASE, &["vm.min_free_kbytes=8192"]).is_ok());
}

#[test]
fn a_preset_value_is_blamed_on_the_preset() {
    let dir = std::env::temp_dir().join(format!("tierlab-preset-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("p.toml"),
        "[machine]\ncpus = 8\n[[machine.nodes]]\ncapacity_mib = 64\nread_latency_ns = 90\n\
         write_latency_ns = 90\ncpus = \"0-7\"\n",
    )
    .unwrap();
    let scenario =
        "machine_preset = \"p.toml\"\n[machine]\ncpus = 2\n[workload]\ntype = \"none\"\n";
    let e = Config::from_str_with(scenario, "s.toml", Some(&dir), &[]).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{}", dir.join("p.toml").display())),
        "{text}"
    );
    assert!(
        text.contains("machine_preset of s.toml") && text.contains("machine.nodes[0].cpus"),
        "{text}"
    );
    // A key the scenario sets itself stays the scenario's.
    let own = "machine_preset = \"p.toml\"\n[machine]\ncpus = 300\n[workload]\ntype = \"none\"\n";
    let e = Config::from_str_with(own, "s.toml", Some(&dir), &[]).unwrap_err();
    assert!(
        e.to_string().starts_with("s.toml: key `machine.cpus`"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
