
*€ç€èBint32_data-f16