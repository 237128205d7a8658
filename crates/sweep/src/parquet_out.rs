//! The table as one Parquet file: one row group, required columns (INT64, DOUBLE, BOOLEAN,
//! UTF-8 strings), uncompressed, written with parquet's low-level column writer.

use crate::table::{Table, Values};
use parquet::basic::{LogicalType, Repetition, Type as Physical};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::path::Path;
use std::sync::Arc;

fn schema(table: &Table) -> parquet::errors::Result<Type> {
    let fields = table
        .columns
        .iter()
        .map(|c| {
            let (physical, logical) = match c.values {
                Values::Int(_) => (Physical::INT64, None),
                Values::Float(_) => (Physical::DOUBLE, None),
                Values::Bool(_) => (Physical::BOOLEAN, None),
                Values::Str(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
            };
            Type::primitive_type_builder(&c.name, physical)
                .with_repetition(Repetition::REQUIRED)
                .with_logical_type(logical)
                .build()
                .map(Arc::new)
        })
        .collect::<parquet::errors::Result<Vec<_>>>()?;
    Type::group_type_builder("sweep")
        .with_fields(fields)
        .build()
}

/// Write `table` to `path`.
pub fn write(table: &Table, path: &Path) -> parquet::errors::Result<()> {
    let file = std::fs::File::create(path)?;
    // A fixed writer name: the file's bytes depend only on the table.
    let props = WriterProperties::builder()
        .set_created_by("tierlab sweep".into())
        .build();
    let mut writer = SerializedFileWriter::new(file, Arc::new(schema(table)?), Arc::new(props))?;
    let mut group = writer.next_row_group()?;
    for column in &table.columns {
        let mut col = group
            .next_column()?
            .expect("the schema has a field per column");
        match &column.values {
            Values::Int(v) => {
                col.typed::<Int64Type>().write_batch(v, None, None)?;
            }
            Values::Float(v) => {
                col.typed::<DoubleType>().write_batch(v, None, None)?;
            }
            Values::Bool(v) => {
                col.typed::<BoolType>().write_batch(v, None, None)?;
            }
            Values::Str(v) => {
                let bytes: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(s.as_str())).collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&bytes, None, None)?;
            }
        }
        col.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Column;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;

    #[test]
    fn a_table_reads_back() {
        let col = |name: &str, values| Column {
            name: name.into(),
            values,
        };
        let table = Table {
            columns: vec![
                col("id", Values::Str(vec!["a".into(), "b,c".into()])),
                col("n", Values::Int(vec![1, -2])),
                col("x", Values::Float(vec![0.5, 2.0])),
                col("on", Values::Bool(vec![true, false])),
            ],
            missing: Vec::new(),
        };
        let path = std::env::temp_dir().join(format!("tierlab-pq-{}.parquet", std::process::id()));
        write(&table, &path).unwrap();
        let reader = SerializedFileReader::try_from(path.as_path()).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
        let rows: Vec<_> = reader.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(rows[1].get_string(0).unwrap(), "b,c");
        assert_eq!(rows[1].get_long(1).unwrap(), -2);
        assert_eq!(rows[0].get_double(2).unwrap(), 0.5);
        assert!(rows[0].get_bool(3).unwrap());
        let _ = std::fs::remove_file(&path);
    }
}
