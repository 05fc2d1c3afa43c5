//! What crosses between the store and the database: values bound to statements
//! ([`Value`], or whole columns as PostgreSQL arrays, [`Column`]), the types rows are
//! decoded as ([`Ty`]) and the decoded rows ([`Row`]); and the `VALUES` and `UNNEST`
//! sources that present many rows to one statement.

use super::error::StoreError;

/// A value bound to or read from a statement. NULLs are typed: PostgreSQL checks a
/// parameter's declared type even when it is NULL.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A 64-bit integer.
    Int(Option<i64>),
    /// Text.
    Text(Option<String>),
    /// Bytes.
    Blob(Option<Vec<u8>>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Self::Int(Some(v))
    }
}
impl From<Option<i64>> for Value {
    fn from(v: Option<i64>) -> Self {
        Self::Int(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Self::Int(Some(i64::from(v)))
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Self::Text(Some(v.to_owned()))
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Self::Text(Some(v))
    }
}
impl From<Option<String>> for Value {
    fn from(v: Option<String>) -> Self {
        Self::Text(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Self::Blob(Some(v))
    }
}
impl From<Option<Vec<u8>>> for Value {
    fn from(v: Option<Vec<u8>>) -> Self {
        Self::Blob(v)
    }
}

/// A whole column of rows bound as one PostgreSQL array, for `UNNEST`: one statement
/// text whatever the batch size (prepared and planned once per connection), and a
/// dozen parameters instead of a dozen per row.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// `bigint[]`.
    Int(Vec<Option<i64>>),
    /// `text[]`.
    Text(Vec<Option<String>>),
    /// `bytea[]`.
    Blob(Vec<Option<Vec<u8>>>),
}

impl Column {
    /// The columns of `rows`, which all have the shape of the first (each value's type
    /// comes from its variant, NULLs included).
    pub fn transpose(rows: Vec<Vec<Value>>) -> Vec<Self> {
        let Some(first) = rows.first() else { return Vec::new() };
        let mut columns: Vec<Self> = first
            .iter()
            .map(|v| match v {
                Value::Int(_) => Self::Int(Vec::with_capacity(rows.len())),
                Value::Text(_) => Self::Text(Vec::with_capacity(rows.len())),
                Value::Blob(_) => Self::Blob(Vec::with_capacity(rows.len())),
            })
            .collect();
        for row in rows {
            for (column, value) in columns.iter_mut().zip(row) {
                column.push(value);
            }
        }
        columns
    }

    /// The columns of `rows`, typed as `types` says: unlike [`transpose`](Self::transpose)
    /// this holds for no rows too (a statement's arrays keep their types when empty).
    pub fn of_rows(rows: Vec<Vec<Value>>, types: &[Ty]) -> Vec<Self> {
        let mut columns: Vec<Self> = types
            .iter()
            .map(|ty| match ty {
                Ty::Int | Ty::OptInt => Self::Int(Vec::with_capacity(rows.len())),
                Ty::Text | Ty::OptText => Self::Text(Vec::with_capacity(rows.len())),
                Ty::Blob | Ty::OptBlob => Self::Blob(Vec::with_capacity(rows.len())),
            })
            .collect();
        for row in rows {
            for (column, value) in columns.iter_mut().zip(row) {
                column.push(value);
            }
        }
        columns
    }

    fn push(&mut self, value: Value) {
        match (self, value) {
            (Self::Int(c), Value::Int(v)) => c.push(v),
            (Self::Text(c), Value::Text(v)) => c.push(v),
            (Self::Blob(c), Value::Blob(v)) => c.push(v),
            (Self::Int(c), _) => c.push(None),
            (Self::Text(c), _) => c.push(None),
            (Self::Blob(c), _) => c.push(None),
        }
    }

    fn array_type(&self) -> &'static str {
        match self {
            Self::Int(_) => "bigint[]",
            Self::Text(_) => "text[]",
            Self::Blob(_) => "bytea[]",
        }
    }
}

/// `UNNEST($1::bigint[], $2::text[], …) AS alias(column1, column2, …)` over `columns`:
/// the same column names a `VALUES` list has.
pub fn unnest(columns: &[Column], alias: &str) -> String {
    unnest_from(columns, alias, 1, false)
}

/// [`unnest`] with the arrays bound from parameter `$first` on (several sources in one
/// statement); `ordinality` adds each row's position as column `ordinality`.
pub fn unnest_from(columns: &[Column], alias: &str, first: usize, ordinality: bool) -> String {
    let arrays = columns.iter().enumerate().map(|(i, c)| format!("${}::{}", first + i, c.array_type()));
    let mut names: Vec<String> = (1..=columns.len()).map(|i| format!("column{i}")).collect();
    let with = if ordinality {
        names.push("ordinality".into());
        " WITH ORDINALITY"
    } else {
        ""
    };
    format!("UNNEST({}){with} AS {alias}({})", arrays.collect::<Vec<_>>().join(", "), names.join(", "))
}

/// The type a column is decoded as. A column decoded as a non-optional type that holds
/// NULL, or a value of another type, is corrupt data (an error), never a default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `BIGINT` / `INTEGER`, never NULL.
    Int,
    /// `TEXT`, never NULL.
    Text,
    /// `BYTEA` / `BLOB`, never NULL.
    Blob,
    /// `BIGINT` / `INTEGER` or NULL.
    OptInt,
    /// `TEXT` or NULL.
    OptText,
    /// `BYTEA` / `BLOB` or NULL.
    OptBlob,
}

/// A decoded row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    // Rows of statements that name their columns in place (a count, a RETURNING, a
    // catalogue query) are read by position; `what` names the column (`jobs.count`) in
    // the corrupt error a NULL, a value of another type or a missing column gives.

    fn at(&self, i: usize, what: &str) -> Result<&Value, StoreError> {
        self.0.get(i).ok_or_else(|| StoreError::Corrupt(format!("{what}: missing from the row")))
    }

    /// Column `i`, an integer or NULL.
    pub fn opt_int(&self, i: usize, what: &str) -> Result<Option<i64>, StoreError> {
        match self.at(i, what)? {
            Value::Int(v) => Ok(*v),
            other => Err(StoreError::Corrupt(format!("{what}: {other:?} where a number must be"))),
        }
    }

    /// Column `i`, an integer that may not be NULL.
    pub fn int(&self, i: usize, what: &str) -> Result<i64, StoreError> {
        self.opt_int(i, what)?.ok_or_else(|| StoreError::Corrupt(format!("{what}: NULL where a number must be")))
    }

    /// Column `i`, an integer that fits `T` (a count, a version).
    pub fn num<T: TryFrom<i64>>(&self, i: usize, what: &str) -> Result<T, StoreError> {
        let n = self.int(i, what)?;
        T::try_from(n).map_err(|_| StoreError::Corrupt(format!("{what}: {n} is out of range")))
    }

    /// Column `i`, text or NULL.
    pub fn opt_text(&self, i: usize, what: &str) -> Result<Option<String>, StoreError> {
        match self.at(i, what)? {
            Value::Text(v) => Ok(v.clone()),
            other => Err(StoreError::Corrupt(format!("{what}: {other:?} where text must be"))),
        }
    }

    /// Column `i`, text that may not be NULL.
    pub fn text(&self, i: usize, what: &str) -> Result<String, StoreError> {
        self.opt_text(i, what)?.ok_or_else(|| StoreError::Corrupt(format!("{what}: NULL where text must be")))
    }

    /// Column `i`, bytes or NULL.
    pub fn opt_blob(&self, i: usize, what: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.at(i, what)? {
            Value::Blob(v) => Ok(v.clone()),
            other => Err(StoreError::Corrupt(format!("{what}: {other:?} where bytes must be"))),
        }
    }

    /// Moves column `i` out as bytes or NULL (no copy).
    pub fn take_opt_blob(&mut self, i: usize, what: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.0.get_mut(i) {
            Some(Value::Blob(v)) => Ok(v.take()),
            other => Err(StoreError::Corrupt(format!("{what}: {other:?} where bytes must be"))),
        }
    }
}

/// Placeholders `($a, $b, …)` for `rows` rows of `cols` columns, numbered from `first`.
pub fn values_list(rows: usize, cols: usize, first: usize) -> String {
    let mut out = String::new();
    let mut n = first;
    for r in 0..rows {
        if r > 0 {
            out.push(',');
        }
        out.push('(');
        for c in 0..cols {
            if c > 0 {
                out.push(',');
            }
            out.push('$');
            out.push_str(&n.to_string());
            n += 1;
        }
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corrupt_text(e: StoreError) -> String {
        match e {
            StoreError::Corrupt(what) => what,
            other => panic!("expected a corrupt error, got {other:?}"),
        }
    }

    #[test]
    fn a_cell_read_by_position_is_corrupt_when_null_of_another_type_or_missing() {
        let row = Row(vec![Value::Int(None), Value::Text(Some("x".into())), Value::Int(Some(-1))]);
        let null = corrupt_text(row.int(0, "jobs.count").expect_err("NULL is no count"));
        assert!(null.starts_with("jobs.count: NULL"), "{null}");
        let typed = corrupt_text(row.int(1, "jobs.seq").expect_err("text is no number"));
        assert!(typed.starts_with("jobs.seq: Text"), "{typed}");
        let missing = corrupt_text(row.text(3, "jobs.id").expect_err("no fourth column"));
        assert_eq!(missing, "jobs.id: missing from the row");
        let range = corrupt_text(row.num::<u32>(2, "jobs.count").expect_err("-1 is no u32"));
        assert_eq!(range, "jobs.count: -1 is out of range");
        assert_eq!(row.opt_int(0, "jobs.run_at").expect("a NULL where one may be"), None);
        assert_eq!(row.text(1, "jobs.kind").expect("text"), "x");
    }
}
