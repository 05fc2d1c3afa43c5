//! `spindle bench --only scale-out`: real `spindle serve` processes on one real
//! PostgreSQL database. The figures are the benchmark's business; the test asserts that
//! every host count ran every job to success and was reported and checked.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_two_and_three_hosts_run_every_job_on_one_database() {
    let admin = spindle_tests::postgres::fresh_database().await;
    let report = spindle_tests::bench(&[
        "--backend",
        "postgres",
        "--database-url",
        &admin,
        "--only",
        "scale-out",
        "--jobs",
        "300",
        "--submit-batch",
        "100",
        "--concurrency",
        "16",
    ]);
    let scale = &report["scale_out"];
    assert_eq!(scale["jobs"], 300, "{scale}");
    assert_eq!(scale["concurrency_per_host"], 16, "{scale}");
    let runs = scale["runs"].as_array().expect("runs");
    let hosts: Vec<u64> = runs.iter().filter_map(|r| r["hosts"].as_u64()).collect();
    assert_eq!(hosts, [1, 2, 3], "{scale}");
    for run in runs {
        assert!(run["jobs_per_sec"].as_f64().is_some_and(|f| f > 0.0), "{run}");
    }
    assert_eq!(runs[0]["vs_one_host"].as_f64(), Some(1.0), "{scale}");
    let checked = report["targets"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["what"].as_str().is_some_and(|w| w.contains("1, 2, 3 hosts"))));
    assert!(checked, "the no-fall target is checked: {}", report["targets"]);
}
