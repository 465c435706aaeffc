//! Reading a workload: a file or a folder of manifests (multi-document
//! YAML, JSON, Lists) holding Pods, the controllers whose pods
//! [`super::expand`] creates as the controllers would, and PriorityClasses
//! (whose values the API server's admission would write into
//! `spec.priority`).
//!
//! Errors name the file, the line and column, the document and the field,
//! as the snapshot loader's do; an object kind the simulator does not model
//! is an error rather than silently nothing.

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;

use super::expand::{Expanded, Expander};
use super::timing;
use crate::cache::snapshot_file::validate;
use crate::yaml::{self, FieldPath, Mark};

/// A workload that could not be read, with where.
#[derive(Debug, thiserror::Error)]
pub struct WorkloadError {
    /// The file.
    pub file: String,
    /// Where in it, when the problem has a place.
    pub position: Option<Mark>,
    /// What is wrong (document, object, field, problem).
    pub message: String,
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(m) => write!(f, "{}:{}:{}: {}", self.file, m.line, m.column, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// One object of the workload and where it came from.
pub struct Source<'a> {
    /// The file's name, for errors.
    pub file: &'a str,
    /// The file's text, for positions.
    pub text: &'a str,
    /// The document (0-based).
    pub document: usize,
    /// The object's path inside the document (`items[3]` in a List).
    pub within: FieldPath,
}

impl Source<'_> {
    /// An error about `field` of this object (described as `label`).
    pub fn error(&self, label: &str, field: &FieldPath, message: &str) -> WorkloadError {
        let position = yaml::locate(self.text, self.document, &self.within.join(field).0);
        let mut text = format!("document {}", self.document + 1);
        if !self.within.0.is_empty() {
            text.push_str(&format!(", {}", self.within));
        }
        if !label.is_empty() {
            text.push_str(&format!(", {label}"));
        }
        if !field.0.is_empty() {
            text.push_str(&format!(": {field}"));
        }
        text.push_str(&format!(": {message}"));
        WorkloadError {
            file: self.file.to_string(),
            position,
            message: text,
        }
    }

    /// Decodes the object, naming the field that does not decode.
    pub fn decode<T: DeserializeOwned>(
        &self,
        value: Value,
        label: &str,
    ) -> Result<T, WorkloadError> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let field = FieldPath::from_tracked(e.path());
            let (_, message) = yaml::split_error(e.inner());
            self.error(label, &field, &message)
        })
    }

    /// Checks a pod (or a controller's template, at `template`) as the API
    /// server would, and that every container asks for resources: a pod
    /// without requests fits anywhere and says nothing about capacity, so in
    /// a simulation it is almost always a forgotten field.
    pub fn check_pod(
        &self,
        label: &str,
        template: &FieldPath,
        pod: &Pod,
    ) -> Result<(), WorkloadError> {
        validate::pod(pod).map_err(|p| self.error(label, &template.join(&p.field), &p.message))?;
        timing::check(pod.metadata.annotations.as_ref()).map_err(|(key, message)| {
            let field = template.key("metadata").key("annotations").key(key);
            self.error(label, &field, &message)
        })?;
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default();
        if containers.is_empty() {
            let field = template.key("spec").key("containers");
            return Err(self.error(label, &field, "required value: at least one container"));
        }
        for (i, c) in containers.iter().enumerate() {
            let r = c.resources.as_ref();
            let asks = r.is_some_and(|r| {
                r.requests.as_ref().is_some_and(|m| !m.is_empty())
                    || r.limits.as_ref().is_some_and(|m| !m.is_empty())
            });
            if !asks {
                let field = template
                    .key("spec")
                    .key("containers")
                    .index(i)
                    .key("resources");
                return Err(self.error(
                    label,
                    &field,
                    "required value: resources.requests (or limits): a simulated pod must say what it needs",
                ));
            }
        }
        Ok(())
    }
}

/// The kinds a workload may hold.
const KINDS: &str = "Pod, Deployment, ReplicaSet, StatefulSet, Job, PriorityClass or List";

/// Reads every manifest at `path`: the file, or the folder's `.yaml`,
/// `.yml` and `.json` files in name order. Pods come out in file order,
/// each controller's pods in its own order.
pub fn load(path: &Path, expander: &mut Expander) -> Result<Expanded, WorkloadError> {
    let files = files_at(path)?;
    let mut texts = Vec::with_capacity(files.len());
    for file in &files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file).map_err(|e| WorkloadError {
            file: name.clone(),
            position: None,
            message: e.to_string(),
        })?;
        texts.push((name, text));
    }
    // PriorityClasses first: a pod may come before the class it names.
    let mut objects = Vec::new();
    for (name, text) in &texts {
        read_objects(name, text, &mut objects)?;
    }
    for (source, value) in &objects {
        if kind_of(value) == "PriorityClass" {
            let label = label_of("PriorityClass", value, false);
            let class: PriorityClass = source.decode(value.clone(), &label)?;
            expander.add_priority_class(&class);
        }
    }
    for (source, value) in objects {
        add(expander, &source, value)?;
    }
    Ok(expander.take())
}

fn files_at(path: &Path) -> Result<Vec<PathBuf>, WorkloadError> {
    let unreadable = |e: std::io::Error| WorkloadError {
        file: path.display().to_string(),
        position: None,
        message: e.to_string(),
    };
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(unreadable)? {
        let file = entry.map_err(unreadable)?.path();
        let manifest = file
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        if manifest && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(WorkloadError {
            file: path.display().to_string(),
            position: None,
            message: "no .yaml, .yml or .json files in the folder".into(),
        });
    }
    Ok(files)
}

/// Every object of one file, Lists unpacked, with where it sits.
fn read_objects<'a>(
    file: &'a str,
    text: &'a str,
    out: &mut Vec<(Source<'a>, Value)>,
) -> Result<(), WorkloadError> {
    let failed = |position, message| WorkloadError {
        file: file.to_string(),
        position,
        message,
    };
    yaml::check_limits(text).map_err(|e| failed(Some(e.mark), e.message))?;
    for (document, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value: Value = serde::Deserialize::deserialize(de).map_err(|e| {
            let (position, message) = yaml::split_error(&e);
            failed(position, format!("document {}: {message}", document + 1))
        })?;
        let source = Source {
            file,
            text,
            document,
            within: FieldPath::default(),
        };
        unpack(source, value, out)?;
    }
    Ok(())
}

fn unpack<'a>(
    source: Source<'a>,
    value: Value,
    out: &mut Vec<(Source<'a>, Value)>,
) -> Result<(), WorkloadError> {
    let kind = kind_of(&value).to_string();
    match value {
        Value::Null => Ok(()),
        Value::Sequence(items) => unpack_items(&source, &source.within, items, out),
        Value::Mapping(mut m) if kind == "List" || kind.ends_with("List") => {
            match m.remove("items") {
                Some(Value::Sequence(items)) => {
                    unpack_items(&source, &source.within.key("items"), items, out)
                }
                None | Some(Value::Null) => Ok(()),
                Some(_) => {
                    Err(source.error(&kind, &FieldPath::default().key("items"), "must be a list"))
                }
            }
        }
        Value::Mapping(_) => {
            out.push((source, value));
            Ok(())
        }
        _ => Err(source.error("", &FieldPath::default(), "expected an object or a list")),
    }
}

fn unpack_items<'a>(
    source: &Source<'a>,
    list: &FieldPath,
    items: Vec<Value>,
    out: &mut Vec<(Source<'a>, Value)>,
) -> Result<(), WorkloadError> {
    for (j, item) in items.into_iter().enumerate() {
        let at = Source {
            file: source.file,
            text: source.text,
            document: source.document,
            within: list.index(j),
        };
        unpack(at, item, out)?;
    }
    Ok(())
}

fn kind_of(value: &Value) -> &str {
    value.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// `Deployment "ns/web"`, or the bare kind for an object without a name.
fn label_of(kind: &str, value: &Value, namespaced: bool) -> String {
    let meta = value.get("metadata");
    let text = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    match (text("name"), text("namespace")) {
        (Some(name), ns) if namespaced => format!("{kind} \"{}/{name}\"", ns.unwrap_or("default")),
        (Some(name), _) => format!("{kind} {name:?}"),
        (None, _) => kind.to_string(),
    }
}

fn add(expander: &mut Expander, source: &Source<'_>, value: Value) -> Result<(), WorkloadError> {
    let kind = kind_of(&value).to_string();
    let label = label_of(&kind, &value, kind != "PriorityClass");
    let name_field = FieldPath::default().key("metadata").key("name");
    let has_name = value
        .get("metadata")
        .and_then(|m| m.get("name").or_else(|| m.get("generateName")))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let named_kind = matches!(
        kind.as_str(),
        "Pod" | "Deployment" | "ReplicaSet" | "StatefulSet" | "Job"
    );
    if !has_name && named_kind {
        return Err(source.error(
            &label,
            &name_field,
            "required value: the object needs a name",
        ));
    }
    let template = FieldPath::default().key("spec").key("template");
    match kind.as_str() {
        "Pod" => {
            let pod: Pod = source.decode(value, &label)?;
            source.check_pod(&label, &FieldPath::default(), &pod)?;
            expander
                .pod(pod)
                .map_err(|m| source.error(&label, &FieldPath::default(), &m))
        }
        "Deployment" => {
            let d: Deployment = source.decode(value, &label)?;
            let spec = d.spec.clone();
            check_template(source, &label, &template, &spec.template)?;
            expander
                .deployment(&d)
                .map_err(|m| source.error(&label, &template, &m))
        }
        "ReplicaSet" => {
            let rs: ReplicaSet = source.decode(value, &label)?;
            let spec = rs.spec.clone();
            check_template(
                source,
                &label,
                &template,
                &spec.template.unwrap_or_default(),
            )?;
            expander
                .replica_set(&rs)
                .map_err(|m| source.error(&label, &template, &m))
        }
        "StatefulSet" => {
            let ss: StatefulSet = source.decode(value, &label)?;
            let spec = ss.spec.clone();
            check_template(source, &label, &template, &spec.template)?;
            expander
                .stateful_set(&ss)
                .map_err(|m| source.error(&label, &template, &m))
        }
        "Job" => {
            let job: Job = source.decode(value, &label)?;
            let spec = job.spec.clone().unwrap_or_default();
            check_template(source, &label, &template, &spec.template)?;
            expander
                .job(&job)
                .map_err(|m| source.error(&label, &template, &m))
        }
        "PriorityClass" => Ok(()),
        "" => Err(source.error("", &FieldPath::default(), "object has no kind")),
        other => Err(source.error(
            "",
            &FieldPath::default().key("kind"),
            &format!("unsupported kind {other:?} (expected {KINDS})"),
        )),
    }
}

/// A controller's template, checked as the pod it becomes.
fn check_template(
    source: &Source<'_>,
    label: &str,
    at: &FieldPath,
    template: &PodTemplateSpec,
) -> Result<(), WorkloadError> {
    let pod = Pod {
        metadata: template.metadata.clone().unwrap_or_default(),
        spec: template.spec.clone(),
        status: None,
    };
    if pod.spec.is_none() {
        return Err(source.error(
            label,
            &at.key("spec"),
            "required value: the template needs a spec",
        ));
    }
    source.check_pod(label, at, &pod)
}
