Buint64_data-u64Z
€€€€€€€€€