//! Every files-server tool that can open a network connection says so (issue 44, item 3):
//! `openWorldHint: true` on the wire. That is the storage backends' actions (S3, GCS, Azure
//! Blob, SFTP, FTP, WebDAV through FA_storage_*, Dropbox, OneDrive, Box, Drive), their
//! `*_later_init` configuration and `*_close` tools, the OneDrive device-code sign-in, the
//! download, the notifications (and routes that send them), the OpenTelemetry export, and
//! every tool that runs other tools or programs (action lists, conditions, DAGs, schedules,
//! watches, pipelines, FA_run_shell), since what it runs may connect. Every other tool is named
//! here as local-only, so a new tool fails this test until it is classified.

use maljan_files::{FilesConfig, SemanticPolicy, registry};
use maljan_server::{Roots, ToolServer, tool_descriptors};

/// The tools that touch only the host (the complement of the open-world ones).
const LOCAL_ONLY: &[&str] = &[
    "FA_list_dir",
    "FA_create_dir",
    "FA_copy_file",
    "FA_remove_file",
    "FA_copy_dir",
    "FA_copy_all_file_to_dir",
    "FA_copy_specify_extension_file",
    "FA_create_file",
    "FA_remove_dir_tree",
    "FA_rename_dir",
    "FA_rename_file",
    "FA_rotate_backups",
    "FA_sync_dir",
    "FA_zip_dir",
    "FA_zip_file",
    "FA_read_zip_file",
    "FA_unzip_file",
    "FA_unzip_all",
    "FA_zip_info",
    "FA_zip_file_info",
    "FA_set_zip_password",
    "FA_create_tar",
    "FA_extract_tar",
    "FA_file_checksum",
    "FA_verify_checksum",
    "FA_write_manifest",
    "FA_verify_manifest",
    "FA_find_duplicates",
    "FA_integrity_snapshot",
    "FA_integrity_baseline",
    "FA_integrity_accept",
    "FA_integrity_verify",
    "FA_integrity_watch_start",
    "FA_integrity_watch_stop",
    "FA_integrity_status",
    "FA_grep",
    "FA_fast_find",
    "FA_file_split",
    "FA_file_merge",
    "FA_encoding_convert",
    "FA_line_count",
    "FA_sed_replace",
    "FA_diff_files",
    "FA_diff_dirs",
    "FA_apply_patch",
    "FA_json_get",
    "FA_json_set",
    "FA_json_delete",
    "FA_yaml_get",
    "FA_yaml_set",
    "FA_yaml_delete",
    "FA_csv_filter",
    "FA_csv_to_jsonl",
    "FA_jsonl_iter",
    "FA_jsonl_append",
    "FA_parquet_read",
    "FA_parquet_write",
    "FA_csv_to_parquet",
    "FA_encrypt_file",
    "FA_decrypt_file",
    "FA_validate",
    "FA_storage_schemes",
    "FA_schedule_list",
    "FA_schedule_history",
    "FA_schedule_cancel",
    "FA_schedule_remove",
    "FA_schedule_remove_all",
    "FA_watch_stop",
    "FA_watch_stop_all",
    "FA_watch_list",
    "FA_pipeline_validate",
    "FA_pipeline_status",
    "FA_pipeline_history",
    "FA_notify_list",
    "FA_notify_route_list",
    "FA_notify_route_remove",
    "FA_audit_configure",
    "FA_audit_search",
    "FA_audit_count",
    "FA_audit_purge",
    "FA_progress_list",
    "FA_progress_cancel",
    "FA_progress_clear",
    "file_read",
    "file_write",
    "file_copy",
    "file_move",
    "file_checksum",
    "file_verify",
    "storage_list",
    "storage_copy",
    "file_search",
    "pipeline_create",
    "pipeline_run",
    "pipeline_status",
    "integrity_status",
    "audit_search",
];

/// The storage and drive prefixes: every such tool talks to its backend.
const REMOTE_PREFIXES: &[&str] = &[
    "FA_s3_",
    "FA_gcs_",
    "FA_azure_blob_",
    "FA_storage_",
    "FA_sftp_",
    "FA_ftp_",
    "FA_dropbox_",
    "FA_onedrive_",
    "FA_box_",
    "FA_drive_",
];

/// The tools that run other tools or programs, and the rest that connect by name.
const RUNS_OR_CONNECTS: &[&str] = &[
    "FA_execute_action",
    "FA_execute_action_parallel",
    "FA_execute_action_dag",
    "FA_execute_files",
    "FA_if_exists",
    "FA_if_newer",
    "FA_if_size_gt",
    "FA_schedule_add",
    "FA_schedule_job",
    "FA_schedule_pipeline",
    "FA_schedule_run",
    "FA_watch_start",
    "FA_pipeline_run",
    "FA_pipeline_resume",
    "FA_run_shell",
    "FA_download_file",
    "FA_copy_between",
    "FA_notify_send",
    "FA_notify_route_add",
    "FA_tracing_init",
];

fn expected_open_world(name: &str) -> bool {
    if LOCAL_ONLY.contains(&name) {
        return false;
    }
    assert!(
        RUNS_OR_CONNECTS.contains(&name) || REMOTE_PREFIXES.iter().any(|p| name.starts_with(p)),
        "{name} is neither local-only nor known to connect: classify it in this test"
    );
    true
}

fn server() -> (tempfile::TempDir, std::sync::Arc<ToolServer>) {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(FilesConfig::rooted(Roots::new([dir.path()]).unwrap()));
    (dir, ToolServer::new("files-test", "0", reg))
}

#[test]
fn every_tool_that_can_connect_is_marked_open_world_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let reg = registry(FilesConfig::rooted(Roots::new([dir.path()]).unwrap()));
    let mut wrong = Vec::new();
    for t in reg.tools() {
        if t.meta.open_world != expected_open_world(&t.meta.name) {
            wrong.push(format!("{} open_world={}", t.meta.name, t.meta.open_world));
        }
    }
    assert!(wrong.is_empty(), "misclassified: {wrong:#?}");
    // The examples, one by one.
    for name in [
        "FA_s3_later_init",
        "FA_azure_blob_later_init",
        "FA_ftp_later_init",
        "FA_sftp_later_init",
        "FA_dropbox_later_init",
        "FA_onedrive_later_init",
        "FA_box_later_init",
        "FA_drive_later_init",
        "FA_onedrive_device_code_login",
    ] {
        let t = reg
            .get(name)
            .unwrap_or_else(|| panic!("{name} is registered"));
        assert!(t.meta.open_world, "{name}");
    }
}

#[test]
fn the_listed_tools_carry_open_world_hint() {
    let (_dir, server) = server();
    let listed = tool_descriptors(&server);
    assert!(listed.len() > 100);
    // The manifest tool is the framework's: it reads nothing but the server itself.
    for t in listed.iter().filter(|t| t.name != "capabilities") {
        let hint = t.annotations.as_ref().and_then(|a| a.open_world_hint);
        assert_eq!(
            hint,
            Some(expected_open_world(&t.name)),
            "{}: openWorldHint {hint:?}",
            t.name
        );
    }
}

#[test]
fn semantic_tools_are_open_world_when_a_root_is_a_remote_store() {
    let semantic = |roots: &[&str]| SemanticPolicy {
        roots: roots.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    };
    let open = |policy: SemanticPolicy, name: &str| {
        let dir = tempfile::tempdir().unwrap();
        let reg = registry(FilesConfig {
            semantic: policy,
            ..FilesConfig::rooted(Roots::new([dir.path()]).unwrap())
        });
        reg.get(name).unwrap().meta.open_world
    };
    for name in [
        "file_read",
        "file_copy",
        "storage_list",
        "storage_copy",
        "pipeline_run",
    ] {
        assert!(open(semantic(&["s3://bucket/team"]), name), "{name} on s3");
        assert!(
            open(semantic(&["/tmp", "sftp://host/inbox"]), name),
            "{name} on sftp"
        );
        assert!(
            !open(semantic(&["memory://scratch"]), name),
            "{name} in memory"
        );
        assert!(!open(semantic(&["/tmp"]), name), "{name} local");
    }
    // The reports read the server's own state only.
    assert!(!open(semantic(&["s3://bucket/team"]), "audit_search"));
}
