pragma solidity ^0.8.0;

interface IAxelarGateway {
    int64_t get_id();
    int64_t get_id_by_name(const std::string& name);
    int64_t get_id_by_name_by_name(const std::string& name);
    int64_t get_id_by_name_by_name_by_name(const std::string& name);
    int64_t get_id_by_name_by_name_by_name_by_name(const std::string& name);
    int64_t get_id_by_name_by_name_by_name_by_name_by_name(const std::string& name);
    int64_t get_id_by_name_by_name_by_name_by_name_by_name(const std::string& name);
    int64_t get_id_by_name_by_name_by_name_by_name_by_name(const std::string& name);
    int64_t get_id_by_name_by_name_by_name_by_name_by_name(const std::string& name);
    int64_t get_id_by_name_by_name_by_name_by_name_by_name(const std::string