//! Rows in and out: records read by column name ([`Columns`], [`Reader`]), where a
//! NULL, a value of another type or a name no enum knows is a corrupt error naming its
//! table and column, never a silent default; and multi-row statements on either
//! backend.

use spindle_core::{JobId, Timestamp};

use super::error::StoreError;
use super::sql::{Backend, Column, Row, Tx, Ty, Value, unnest, values_list};

/// Most bind parameters per statement (both backends allow more).
pub(super) const MAX_PARAMS: usize = 4_000;

pub(super) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

pub(super) fn parse_id(text: &str, what: &str) -> Result<JobId, StoreError> {
    text.parse().map_err(|e| corrupt(format!("{what}: {e}")))
}

/// The columns a record is read from: its table, and each column's name and type in
/// the order a `SELECT` of [`list`](Self::list) names them.
#[derive(Debug)]
pub(super) struct Columns {
    /// The table, for errors.
    pub table: &'static str,
    /// Each column's name.
    pub names: &'static [&'static str],
    /// Each column's type, in the same order.
    pub tys: &'static [Ty],
}

impl Columns {
    /// `a, b, c`: the columns as a `SELECT` names them.
    pub fn list(&self) -> String {
        self.names.join(", ")
    }

    /// Reads `row`, fetched with [`tys`](Self::tys), by column name.
    pub fn read<'r>(&'static self, row: &'r mut Row) -> Reader<'r> {
        Reader { columns: self, row }
    }

    /// Names the table in a corrupt error a fetch of these columns gave (the decoding
    /// names the column).
    pub fn in_table(&self, e: impl Into<StoreError>) -> StoreError {
        match e.into() {
            StoreError::Corrupt(what) => StoreError::Corrupt(format!("{}: {what}", self.table)),
            other => other,
        }
    }
}

/// One row of a record's [`Columns`], read by column name.
#[derive(Debug)]
pub(super) struct Reader<'r> {
    columns: &'static Columns,
    row: &'r mut Row,
}

impl Reader<'_> {
    /// A corrupt error naming the table and `column`.
    pub fn corrupt(&self, column: &str, what: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt(format!("{}.{column}: {what}", self.columns.table))
    }

    fn at(&self, column: &str) -> Result<usize, StoreError> {
        self.columns.names.iter().position(|n| *n == column).ok_or_else(|| self.corrupt(column, "not selected"))
    }

    fn value(&self, column: &str) -> Result<&Value, StoreError> {
        let i = self.at(column)?;
        self.row.0.get(i).ok_or_else(|| self.corrupt(column, "missing from the row"))
    }

    /// An integer column, which may not be NULL.
    pub fn int(&self, column: &str) -> Result<i64, StoreError> {
        self.opt_int(column)?.ok_or_else(|| self.corrupt(column, "NULL where a number must be"))
    }

    /// An integer column, or NULL.
    pub fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        match self.value(column)? {
            Value::Int(v) => Ok(*v),
            other => Err(self.corrupt(column, format!("{other:?} where a number must be"))),
        }
    }

    /// An integer column that fits `T` (a count, a version, a size).
    pub fn num<T: TryFrom<i64>>(&self, column: &str) -> Result<T, StoreError> {
        let n = self.int(column)?;
        T::try_from(n).map_err(|_| self.corrupt(column, format!("{n} is out of range")))
    }

    /// [`num`](Self::num), or NULL.
    pub fn opt_num<T: TryFrom<i64>>(&self, column: &str) -> Result<Option<T>, StoreError> {
        self.opt_int(column)?
            .map(|n| T::try_from(n).map_err(|_| self.corrupt(column, format!("{n} is out of range"))))
            .transpose()
    }

    /// A time column (microseconds), which may not be NULL.
    pub fn ts(&self, column: &str) -> Result<Timestamp, StoreError> {
        self.int(column).map(Timestamp::from_micros)
    }

    /// A time column, or NULL.
    pub fn opt_ts(&self, column: &str) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.opt_int(column)?.map(Timestamp::from_micros))
    }

    /// A text column, which may not be NULL.
    pub fn text(&self, column: &str) -> Result<String, StoreError> {
        self.opt_text(column)?.ok_or_else(|| self.corrupt(column, "NULL where text must be"))
    }

    /// A text column, or NULL.
    pub fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        match self.value(column)? {
            Value::Text(v) => Ok(v.clone()),
            other => Err(self.corrupt(column, format!("{other:?} where text must be"))),
        }
    }

    /// A text column that names a value `parse` knows (an enum's name).
    pub fn parse<T>(&self, column: &str, parse: impl FnOnce(&str) -> Option<T>) -> Result<T, StoreError> {
        let text = self.text(column)?;
        parse(&text).ok_or_else(|| self.corrupt(column, format!("unknown value {text:?}")))
    }

    /// A text column holding JSON of `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self, column: &str) -> Result<T, StoreError> {
        serde_json::from_str(&self.text(column)?).map_err(|e| self.corrupt(column, e))
    }

    /// A job id column.
    pub fn id(&self, column: &str) -> Result<JobId, StoreError> {
        self.text(column)?.parse().map_err(|e| self.corrupt(column, e))
    }

    /// A job id column, or NULL.
    pub fn opt_id(&self, column: &str) -> Result<Option<JobId>, StoreError> {
        self.opt_text(column)?.map(|t| t.parse().map_err(|e| self.corrupt(column, e))).transpose()
    }

    /// A bytes column moved out of the row, or NULL.
    pub fn take_opt_blob(&mut self, column: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let i = self.at(column)?;
        if let Some(Value::Blob(v)) = self.row.0.get_mut(i) {
            return Ok(v.take());
        }
        let found = format!("{:?}", self.row.0.get(i));
        Err(self.corrupt(column, format!("{found} where bytes must be")))
    }

    /// A bytes column moved out of the row, which may not be NULL.
    pub fn take_blob(&mut self, column: &str) -> Result<Vec<u8>, StoreError> {
        self.take_opt_blob(column)?.ok_or_else(|| self.corrupt(column, "NULL where bytes must be"))
    }
}

/// Rows from which a PostgreSQL batch goes as arrays (`UNNEST`) rather than a `VALUES`
/// list. Arrays give one statement text whatever the batch size, prepared once per
/// connection, and a dozen parameters instead of a dozen per row: one-step jobs/s rose
/// ~12% under load. For a few rows a `VALUES` list is quicker (a lone settlement took
/// ~120 µs longer as arrays), and a few sizes of it stay prepared anyway.
const UNNEST_FROM_ROWS: usize = 16;

/// Runs `statement(source)` over `rows` of `cols` values each, where `source` presents
/// them as a table `v(column1, column2, …)`: arrays through `UNNEST` on PostgreSQL from
/// [`UNNEST_FROM_ROWS`] rows, otherwise `VALUES` lists in chunks that fit the parameter
/// limit. Answers the rows the statement returns.
pub(super) async fn over_rows(
    tx: &mut Tx,
    rows: Vec<Vec<Value>>,
    cols: usize,
    statement: impl Fn(&str) -> String,
    tys: &[Ty],
) -> Result<Vec<Row>, StoreError> {
    if tx.backend() == Backend::Postgres && rows.len() >= UNNEST_FROM_ROWS {
        let columns = Column::transpose(rows);
        return Ok(tx.fetch_columns(&statement(&unnest(&columns, "v")), columns, tys).await?);
    }
    let mut out = Vec::new();
    let per_chunk = (MAX_PARAMS / cols).max(1);
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<Vec<Value>> = rows.by_ref().take(per_chunk).collect();
        let source = format!("(VALUES {}) AS v", values_list(chunk.len(), cols, 1));
        out.extend(tx.fetch(&statement(&source), chunk.into_iter().flatten().collect(), tys).await?);
    }
    Ok(out)
}

/// Inserts `rows` with `prefix` (`INSERT INTO t (…)`) and `suffix` (an upsert's
/// `ON CONFLICT …`, or nothing). `WHERE true` is how SQLite tells an upsert's `ON` from
/// a join's.
pub(super) async fn insert_rows(
    tx: &mut Tx,
    prefix: &str,
    suffix: &str,
    cols: usize,
    rows: Vec<Vec<Value>>,
) -> Result<(), StoreError> {
    over_rows(tx, rows, cols, |source| format!("{prefix} SELECT * FROM {source} WHERE true {suffix}"), &[]).await?;
    Ok(())
}

/// Statements sent to SQLite as one text, their parameters numbered in one sequence:
/// sqlx runs them one after another on the connection's worker thread, for one hand-off
/// where each statement sent alone costs one.
///
/// sqlx calls this behaviour of its SQLite driver deprecated (sqlx issue 3108; it is
/// how its migrations run): should an upgrade drop it, the unit test below fails, and
/// the fallback is a statement per hand-off, as before.
#[derive(Debug, Default)]
pub(super) struct Batch {
    sql: String,
    args: Vec<Value>,
}

impl Batch {
    /// Adds `statement` (given its rows' source, `(VALUES …) AS v`) over `rows` of `cols`
    /// values, as statements of at most [`MAX_PARAMS`] parameters; none without rows.
    pub(super) fn over_rows(&mut self, rows: Vec<Vec<Value>>, cols: usize, statement: impl Fn(&str) -> String) {
        let per_chunk = (MAX_PARAMS / cols).max(1);
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let chunk: Vec<Vec<Value>> = rows.by_ref().take(per_chunk).collect();
            let source = format!("(VALUES {}) AS v", values_list(chunk.len(), cols, self.args.len() + 1));
            self.sql.push_str(&statement(&source));
            self.sql.push_str(";\n");
            self.args.extend(chunk.into_iter().flatten());
        }
    }

    /// Runs the statements in `tx` (SQLite's: a PostgreSQL statement is one statement),
    /// answering the rows they return, in order, decoded as `tys`.
    pub(super) async fn run(self, tx: &mut Tx, tys: &[Ty]) -> Result<Vec<Row>, StoreError> {
        debug_assert_eq!(tx.backend(), Backend::Sqlite);
        if self.sql.is_empty() {
            return Ok(Vec::new());
        }
        Ok(tx.fetch(&self.sql, self.args, tys).await?)
    }
}

/// `$first, $first+1, …` for `n` parameters, comma-separated.
pub(super) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's statements bind their parameters in one sequence and answer their rows
    /// in order: rows past one statement's parameter limit go in a second statement,
    /// each value reaching the row it was given for, and a later statement reads what an
    /// earlier one wrote.
    #[tokio::test]
    async fn a_batch_binds_every_statement_in_turn_and_answers_their_rows_in_order() {
        let test = crate::store::test_db::fresh(Backend::Sqlite).await.expect("sqlite");
        let db = &test.db;
        db.execute("CREATE TABLE pairs (n INTEGER NOT NULL, word TEXT NOT NULL)", vec![]).await.expect("table");
        let n = MAX_PARAMS / 2 + 3;
        let rows: Vec<Vec<Value>> = (0..n).map(|i| vec![Value::from(i as i64), Value::from(format!("w{i}"))]).collect();
        let mut batch = Batch::default();
        batch.over_rows(vec![vec![Value::from(-1i64), Value::from("first")]], 2, |source| {
            format!("SELECT v.column1, v.column2 FROM {source}")
        });
        batch.over_rows(rows, 2, |source| {
            format!("INSERT INTO pairs (n, word) SELECT * FROM {source} RETURNING n, word")
        });
        batch.over_rows(vec![vec![Value::from(n as i64 - 1)]], 1, |source| {
            format!("SELECT n, word FROM pairs WHERE n = (SELECT column1 FROM {source})")
        });
        assert_eq!(batch.sql.matches(';').count(), 4, "the inserts over the limit are two statements");
        let mut tx = db.begin().await.expect("begin");
        let answered = batch.run(&mut tx, &[Ty::Int, Ty::Text]).await.expect("batch");
        tx.commit().await.expect("commit");

        let answered: Vec<(i64, String)> = answered
            .iter()
            .map(|r| (r.int(0, "test row").expect("a decodable row"), r.text(1, "test row").expect("a decodable row")))
            .collect();
        let mut expected = vec![(-1, "first".to_owned())];
        expected.extend((0..n).map(|i| (i as i64, format!("w{i}"))));
        expected.push((n as i64 - 1, format!("w{}", n - 1)));
        assert_eq!(answered, expected);
        test.drop().await;
    }
}
