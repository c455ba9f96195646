"""What ge shows of a compiled model: `ge inspect` (om_info, memory_plot, quant_info) and `ge compare`."""
